// Read change events as a consumer of Debezium's AvroConverter does, with
// kafkajs and @kafkajs/confluent-schema-registry: every record of the
// topics given, key and value decoded by the schema their wire-format
// prefix names, fetched from the registry.  Avro longs are read as BigInt
// (Debezium's ts_ns is past what a JavaScript number holds exactly), with
// the type hook of docs/avro.md; with --without-bigint-hook, with the
// library's defaults, as a consumer that does not know of the hook.
// Prints one JSON line per record: topic, partition, the schema ids of key
// and value, key, value (null for a tombstone; {"error": message} for one
// that does not decode), headers, and the bytes of key and value
// (key_bytes, value_bytes); bytes as base64, longs as strings.
//
// Usage: node debezium_avro_consume.js [--without-bigint-hook] BOOTSTRAP REGISTRY_URL COUNT TOPIC...

'use strict';

const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const avsc = require('avsc');
const { consume, schemaId, print, run } = require('./consume');

const args = process.argv.slice(2);
const withHook = args[0] !== '--without-bigint-hook';
const [bootstrap, url, count, ...topics] = withHook ? args : args.slice(1);

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
const registry = withHook
	? new SchemaRegistry({ host: url }, {
		[SchemaType.AVRO]: {
			typeHook: (schema) => (schema === 'long' || (schema && schema.type === 'long') ? longType : undefined),
		},
	})
	: new SchemaRegistry({ host: url });

// a key or value decoded, null for none, or the error that stopped it
async function decode(buffer) {
	if (buffer === null)
		return null;
	try {
		return await registry.decode(buffer);
	} catch (e) {
		return { error: e.message };
	}
}

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
			key: await decode(message.key),
			value: await decode(message.value),
			headers,
			key_bytes: message.key,
			value_bytes: message.value,
		});
	}
});
