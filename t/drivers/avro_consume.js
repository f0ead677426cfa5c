// Read Avro records as a consumer with Confluent's deserializer does: with
// kafkajs and @kafkajs/confluent-schema-registry, which fetches each
// record's writer schema by the id in its first five bytes and decodes
// with avsc.  Logical types as a consumer reads them: a decimal as a
// decimal string (its scale's digits), timestamp-millis and -micros as
// RFC 3339 strings, a date as YYYY-MM-DD; a uuid is a string, bytes and
// fixed are printed in base64.  A key or value without the magic byte is
// printed as its text.  Prints one JSON line per record: topic, partition,
// key, value (null for a tombstone), schema_id (of the value), or error
// (why it could not be decoded).
//
// Usage: node avro_consume.js BOOTSTRAP REGISTRY_URL COUNT TOPIC...

'use strict';

const avsc = require('avsc');
const { SchemaRegistry } = require('@kafkajs/confluent-schema-registry');
const { consume, schemaId, decimal, date, timestampMillis, timestampMicros, print, run } = require('./consume');

const [bootstrap, registryUrl, count, ...topics] = process.argv.slice(2);

// An avsc logical type that reads with fromValue(value, scale), and never
// writes
function reader(fromValue) {
	return class extends avsc.types.LogicalType {
		constructor(attrs, opts) {
			super(attrs, opts);
			this.scale = attrs.scale || 0;
		}

		_fromValue(v) {
			return fromValue(v, this.scale);
		}

		_toValue() {
			throw new Error('decoding only');
		}
	};
}

const registry = new SchemaRegistry({ host: registryUrl }, {
	forSchemaOptions: {
		logicalTypes: {
			decimal: reader(decimal),
			'timestamp-millis': reader(timestampMillis),
			'timestamp-micros': reader(timestampMicros),
			date: reader(date)
		}
	}
});

async function decode(buffer) {
	if (buffer === null)
		return null;
	if (schemaId(buffer) !== null)
		return registry.decode(buffer);
	return buffer.toString('utf8');
}

run(async () => {
	for (const { topic, partition, message } of await consume(bootstrap, topics, count, 'avro-consume')) {
		const record = { topic, partition };
		try {
			record.key = await decode(message.key);
			record.value = await decode(message.value);
		} catch (e) {
			record.error = e.message;
		}
		record.schema_id = schemaId(message.value);
		print(record);
	}
});
