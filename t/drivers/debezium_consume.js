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

const { consume, decimal, date, timestampMillis, timestampMicros, print, run } = require('./consume');

const [bootstrap, count, ...topics] = process.argv.slice(2);

// a value by its Connect schema
function decode(schema, value) {
	if (value === null || value === undefined)
		return null;
	switch (schema.name) {
		case 'org.apache.kafka.connect.data.Decimal':
			return decimal(Buffer.from(value, 'base64'), Number(schema.parameters.scale));
		case 'io.debezium.data.VariableScaleDecimal':
			return decimal(Buffer.from(value.value, 'base64'), value.scale);
		case 'io.debezium.data.Json':
			return JSON.parse(value);
		case 'io.debezium.time.Date':
			return date(value);
		case 'io.debezium.time.Timestamp':
			return timestampMillis(value);
		case 'io.debezium.time.MicroTimestamp':
			return timestampMicros(value);
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

run(async () => {
	for (const { topic, partition, message } of await consume(bootstrap, topics, count, 'debezium-consume'))
		print({ topic, partition, key: parse(message.key), value: parse(message.value) });
});
