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
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry } = require('@kafkajs/confluent-schema-registry');

const [bootstrap, registryUrl, count, ...topics] = process.argv.slice(2);

class Decimal extends avsc.types.LogicalType {
	constructor(attrs, opts) {
		super(attrs, opts);
		this.scale = attrs.scale || 0;
	}

	_fromValue(buf) {
		let v = 0n;
		for (const b of buf)
			v = (v << 8n) | BigInt(b);
		if (buf.length > 0 && buf[0] & 0x80)
			v -= 1n << BigInt(8 * buf.length);
		const negative = v < 0n;
		let digits = (negative ? -v : v).toString().padStart(this.scale + 1, '0');
		if (this.scale > 0)
			digits = digits.slice(0, -this.scale) + '.' + digits.slice(-this.scale);
		return (negative ? '-' : '') + digits;
	}

	_toValue() {
		throw new Error('decoding only');
	}
}

class TimestampMillis extends avsc.types.LogicalType {
	_fromValue(ms) {
		return new Date(Number(ms)).toISOString();
	}

	_toValue() {
		throw new Error('decoding only');
	}
}

class TimestampMicros extends avsc.types.LogicalType {
	_fromValue(us) {
		const ms = Math.floor(us / 1000);
		return new Date(ms).toISOString().slice(0, -1) +
			String(us - ms * 1000).padStart(3, '0') + 'Z';
	}

	_toValue() {
		throw new Error('decoding only');
	}
}

class DateType extends avsc.types.LogicalType {
	_fromValue(days) {
		return new Date(days * 86400000).toISOString().slice(0, 10);
	}

	_toValue() {
		throw new Error('decoding only');
	}
}

const registry = new SchemaRegistry({ host: registryUrl }, {
	forSchemaOptions: {
		logicalTypes: {
			decimal: Decimal,
			'timestamp-millis': TimestampMillis,
			'timestamp-micros': TimestampMicros,
			date: DateType
		}
	}
});

async function decode(buffer) {
	if (buffer === null)
		return null;
	if (buffer.length >= 5 && buffer[0] === 0)
		return registry.decode(buffer);
	return buffer.toString('utf8');
}

// Buffers (bytes, fixed) as base64
function replacer(key, value) {
	if (value && value.type === 'Buffer' && Array.isArray(value.data))
		return Buffer.from(value.data).toString('base64');
	return value;
}

async function main() {
	const kafka = new Kafka({ brokers: bootstrap.split(','), logLevel: logLevel.NOTHING });
	const consumer = kafka.consumer({ groupId: `avro-consume-${process.pid}` });
	const records = [];
	await consumer.connect();
	await consumer.subscribe({ topics, fromBeginning: true });
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${records.length} of ${count} records`)), 60000);
		consumer.run({
			eachMessage: async ({ topic, partition, message }) => {
				const record = { topic, partition };
				try {
					record.key = await decode(message.key);
					record.value = await decode(message.value);
				} catch (e) {
					record.error = e.message;
				}
				record.schema_id = message.value && message.value[0] === 0 ?
					message.value.readInt32BE(1) : null;
				records.push(record);
				if (records.length >= Number(count)) {
					clearTimeout(timer);
					resolve();
				}
			},
		}).catch(reject);
	});
	await consumer.disconnect();
	for (const r of records)
		console.log(JSON.stringify(r, replacer));
}

main().catch((e) => {
	console.error(e.message);
	process.exit(1);
});
