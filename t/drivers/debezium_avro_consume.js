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

const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const avsc = require('avsc');
const { consume, schemaId, print, run } = require('./consume');

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

run(async () => {
	for (const { topic, partition, message } of await consume(bootstrap, topics, count, 'debezium-avro-consume')) {
		const headers = {};
		for (const [name, value] of Object.entries(message.headers || {}))
			headers[name] = value.toString('utf8');
		print({
			topic,
			partition,
			key_schema: schemaId(message.key),
			value_schema: schemaId(message.value),
			key: message.key === null ? null : await registry.decode(message.key),
			value: message.value === null ? null : await registry.decode(message.value),
			headers,
		});
	}
});
