// Read records as a CloudEvents consumer does, with kafkajs and the
// cloudevents SDK's Kafka binding: the headers as strings (kafkajs gives
// Buffers), then Kafka.isEvent, Kafka.toEvent and the SDK's validation.
// Prints one JSON line per record: topic, partition, key, headers (as
// strings, a repeated name as a list), is_event, and for an event: event
// (as the SDK writes it), valid (true, or the SDK's errors) and data_text
// (binary data as UTF-8).
//
// Usage: node cloudevents_consume.js BOOTSTRAP COUNT TOPIC...

'use strict';

const { Kafka } = require('cloudevents');
const { consume, print, run } = require('./consume');

const [bootstrap, count, ...topics] = process.argv.slice(2);

function text(v) {
	return Array.isArray(v) ? v.map((x) => x.toString()) : v.toString();
}

function decode(topic, partition, message) {
	const headers = {};
	for (const [name, value] of Object.entries(message.headers || {}))
		headers[name] = text(value);
	const key = message.key === null ? null : message.key.toString();
	const m = { key, value: message.value, headers };
	const r = { topic, partition, key, headers, is_event: Kafka.isEvent(m) };
	if (!r.is_event)
		return r;
	try {
		const event = Kafka.toEvent(m);
		r.event = JSON.parse(JSON.stringify(event));
		if (Buffer.isBuffer(event.data))
			r.data_text = event.data.toString('utf8');
		try {
			r.valid = event.validate();
		} catch (e) {
			r.valid = e.errors || e.message;
		}
	} catch (e) {
		r.error = e.message;
	}
	return r;
}

run(async () => {
	for (const { topic, partition, message } of await consume(bootstrap, topics, count, 'cloudevents-consume'))
		print(decode(topic, partition, message));
});
