// Read change events as a consumer of Debezium's AvroConverter does, with
// kafkajs and @kafkajs/confluent-schema-registry: every record of the
// topics given, key and value decoded by the schema their wire-format
// prefix names, fetched from the registry.  Avro longs are read as BigInt
// (Debezium's ts_ns is past what a JavaScript number holds exactly).
// Prints one JSON line per record: topic, partition, the schema ids of key
// and value, key, value (null for a tombstone) and headers; bytes as
// base64, longs as strings.
//
// Usage: node debezium_avro_consume.js BOOTSTRAP REGISTRY_URL COUNT TOPIC...

'use strict';

const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const avsc = require('avsc');

const [bootstrap, url, count, ...topics] = process.argv.slice(2);

const longType = avsc.types.LongType.__with({
	fromBuffer: (buf) => buf.readBigInt64LE(),
	toBuffer: (n) => {
		const buf = Buffer.alloc(8);
		buf.writeBigInt64LE(BigInt(n));
		return buf;
	},
	fromJSON: BigInt,
	toJSON: Number,
	isValid: (n) => typeof n === 'bigint',
	compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
});

// every long, with Connect's properties or without
const registry = new SchemaRegistry({ host: url }, {
	[SchemaType.AVRO]: {
		typeHook: (schema) => (schema === 'long' || (schema && schema.type === 'long') ? longType : undefined),
	},
});

function schemaId(buffer) {
	return buffer === null ? null : buffer.readInt32BE(1);
}

function replacer(key, value) {
	const original = this[key];
	if (Buffer.isBuffer(original))
		return original.toString('base64');
	if (typeof original === 'bigint')
		return original.toString();
	return value;
}

async function main() {
	const kafka = new Kafka({ brokers: bootstrap.split(','), logLevel: logLevel.NOTHING });
	const consumer = kafka.consumer({ groupId: `debezium-avro-consume-${process.pid}` });
	const messages = [];
	await consumer.connect();
	await consumer.subscribe({ topics, fromBeginning: true });
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${messages.length} of ${count} records`)), 60000);
		consumer.run({
			eachMessage: async ({ topic, partition, message }) => {
				messages.push({ topic, partition, message });
				if (messages.length >= Number(count)) {
					clearTimeout(timer);
					resolve();
				}
			},
		}).catch(reject);
	});
	await consumer.disconnect();
	for (const { topic, partition, message } of messages) {
		const headers = {};
		for (const [name, value] of Object.entries(message.headers || {}))
			headers[name] = value.toString('utf8');
		console.log(JSON.stringify({
			topic,
			partition,
			key_schema: schemaId(message.key),
			value_schema: schemaId(message.value),
			key: message.key === null ? null : await registry.decode(message.key),
			value: message.value === null ? null : await registry.decode(message.value),
			headers,
		}, replacer));
	}
}

main().catch((e) => {
	console.error(e.stack);
	process.exit(1);
});
