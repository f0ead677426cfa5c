// What the consumers of this folder (*_consume.js) share: reading records
// with kafkajs, the values Kafka's and Avro's types hold as a consumer
// prints them, and how a consumer prints its records and ends.  Required
// by them; it runs nothing itself.

'use strict';

const { Kafka, logLevel } = require('kafkajs');

// The first count records of topics, read from the beginning by a consumer
// group of its own (name and the process id), as { topic, partition,
// message } in the order they came; fails after 60 s, saying how many came.
async function consume(bootstrap, topics, count, name) {
	const kafka = new Kafka({ brokers: bootstrap.split(','), logLevel: logLevel.NOTHING });
	const consumer = kafka.consumer({ groupId: `${name}-${process.pid}` });
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
	return messages;
}

// The schema id of a value in the Schema Registry's wire format (a zero
// byte, the id in four bytes big-endian, the Avro binary), else null.
function schemaId(buffer) {
	return buffer !== null && buffer.length >= 5 && buffer[0] === 0 ? buffer.readInt32BE(1) : null;
}

// A decimal as its string of digits, scale of them after the point, from
// the bytes of its unscaled value (big-endian two's complement), as Avro's
// decimal and Kafka Connect's Decimal write it.
function decimal(bytes, scale) {
	let v = 0n;
	for (const b of bytes)
		v = (v << 8n) | BigInt(b);
	if (bytes.length > 0 && bytes[0] & 0x80)
		v -= 1n << BigInt(8 * bytes.length);
	const negative = v < 0n;
	let digits = (negative ? -v : v).toString().padStart(scale + 1, '0');
	if (scale > 0)
		digits = digits.slice(0, -scale) + '.' + digits.slice(-scale);
	return (negative ? '-' : '') + digits;
}

// Days since 1970-01-01 as YYYY-MM-DD; milliseconds and microseconds since
// 1970 as RFC 3339 strings, to their own precision.
function date(days) {
	return new Date(days * 86400000).toISOString().slice(0, 10);
}

function timestampMillis(ms) {
	return new Date(Number(ms)).toISOString();
}

function timestampMicros(us) {
	const ms = Math.floor(us / 1000);
	return new Date(ms).toISOString().slice(0, -1) + String(us - ms * 1000).padStart(3, '0') + 'Z';
}

// Print a record as one JSON line: bytes (Buffers) as base64, Avro longs
// read as BigInt as their decimal string.
function print(record) {
	console.log(JSON.stringify(record, function (key, value) {
		const original = this[key];
		if (Buffer.isBuffer(original))
			return original.toString('base64');
		if (typeof original === 'bigint')
			return original.toString();
		return value;
	}));
}

// Run a consumer's main: on an error, print it to stderr and exit 1.
function run(main) {
	main().catch((e) => {
		console.error(e.stack);
		process.exit(1);
	});
}

module.exports = { consume, schemaId, decimal, date, timestampMillis, timestampMicros, print, run };
