// Read change events as a Debezium consumer does, with kafkajs: every
// record of the topics given, keys and values parsed as JSON; where a
// record carries its schema ({"schema": ..., "payload": ...}, the JSON
// converter with schemas.enable=true), values decoded by it: Kafka
// Connect's Decimal (base64 of the unscaled value, the scale a parameter)
// and Debezium's VariableScaleDecimal as decimal strings, io.debezium.data.Json
// parsed, the dates and times as ISO strings.  Prints one JSON line per
// record: topic, partition, key, value (null for a tombstone).
//
// Usage: node debezium_consume.js BOOTSTRAP COUNT TOPIC...

'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, count, ...topics] = process.argv.slice(2);

// the unscaled value of a Decimal: big-endian two's complement
function unscaled(base64) {
	const bytes = Buffer.from(base64, 'base64');
	let v = 0n;
	for (const b of bytes)
		v = (v << 8n) | BigInt(b);
	if (bytes.length > 0 && bytes[0] & 0x80)
		v -= 1n << BigInt(8 * bytes.length);
	return v;
}

function decimal(base64, scale) {
	let v = unscaled(base64);
	const negative = v < 0n;
	let digits = (negative ? -v : v).toString().padStart(scale + 1, '0');
	if (scale > 0)
		digits = digits.slice(0, -scale) + '.' + digits.slice(-scale);
	return (negative ? '-' : '') + digits;
}

// a value by its Connect schema
function decode(schema, value) {
	if (value === null || value === undefined)
		return null;
	switch (schema.name) {
		case 'org.apache.kafka.connect.data.Decimal':
			return decimal(value, Number(schema.parameters.scale));
		case 'io.debezium.data.VariableScaleDecimal':
			return decimal(value.value, value.scale);
		case 'io.debezium.data.Json':
			return JSON.parse(value);
		case 'io.debezium.time.Date':
			return new Date(value * 86400000).toISOString().slice(0, 10);
		case 'io.debezium.time.Timestamp':
			return new Date(value).toISOString();
		case 'io.debezium.time.MicroTimestamp':
			return new Date(Math.floor(value / 1000)).toISOString().slice(0, -1)
				+ String(value % 1000).padStart(3, '0') + 'Z';
	}
	if (schema.type === 'struct') {
		const out = {};
		for (const field of schema.fields)
			out[field.field] = decode(field, value[field.field]);
		return out;
	}
	if (schema.type === 'array')
		return value.map((v) => decode(schema.items, v));
	return value;
}

function parse(buffer) {
	if (buffer === null)
		return null;
	const json = JSON.parse(buffer.toString('utf8'));
	if (json !== null && typeof json === 'object' && 'schema' in json && 'payload' in json)
		return decode(json.schema, json.payload);
	return json;
}

async function main() {
	const kafka = new Kafka({ brokers: bootstrap.split(','), logLevel: logLevel.NOTHING });
	const consumer = kafka.consumer({ groupId: `debezium-consume-${process.pid}` });
	const records = [];
	await consumer.connect();
	await consumer.subscribe({ topics, fromBeginning: true });
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${records.length} of ${count} records`)), 60000);
		consumer.run({
			eachMessage: async ({ topic, partition, message }) => {
				records.push({ topic, partition, key: parse(message.key), value: parse(message.value) });
				if (records.length >= Number(count)) {
					clearTimeout(timer);
					resolve();
				}
			},
		}).catch(reject);
	});
	await consumer.disconnect();
	for (const r of records)
		console.log(JSON.stringify(r));
}

main().catch((e) => {
	console.error(e.message);
	process.exit(1);
});
