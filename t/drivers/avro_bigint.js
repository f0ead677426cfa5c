// Run the JavaScript block of docs/avro.md that reads Avro longs as BigInt
// (a type hook of @kafkajs/confluent-schema-registry), as it is there but
// for the registry's URL, on records in the registry's wire format: two
// versions of a record, each with a long past 2^53.  Prints, for the
// registry without the hook and then with it, one line per record: the id
// decoded and its type, or the error.
//
// Usage: node avro_bigint.js DOC REGISTRY_URL

'use strict';

const fs = require('fs');
const avsc = require('avsc');
const { SchemaRegistry } = require('@kafkajs/confluent-schema-registry');

const [doc, url] = process.argv.slice(2);

const blocks = [...fs.readFileSync(doc, 'utf8').matchAll(/^```js\n(.*?)^```/gms)]
	.map((m) => m[1]).filter((b) => b.includes('typeHook') && b.includes('LongType.__with'));
if (blocks.length !== 1)
	throw new Error(`${doc}: ${blocks.length} blocks with the hook, not 1`);
const { registry, longType } = new Function('require',
	`${blocks[0].replace("'http://registry:8081'", JSON.stringify(url))}
	return { registry, longType };`)(require);

async function register(subject, schema) {
	const res = await fetch(`${url}/subjects/${subject}/versions`, {
		method: 'POST',
		headers: { 'Content-Type': 'application/vnd.schemaregistry.v1+json' },
		body: JSON.stringify({ schema: JSON.stringify(schema) }),
	});
	return (await res.json()).id;
}

// magic byte 0, the schema id, the Avro binary
function wire(id, schema, value) {
	const head = Buffer.alloc(5);
	head.writeInt32BE(id, 1);
	const type = avsc.Type.forSchema(schema, { typeHook: (s) => (s === 'long' ? longType : undefined) });
	return Buffer.concat([head, type.toBuffer(value)]);
}

async function main() {
	const v1 = { type: 'record', name: 'Order', namespace: 'shop', fields: [{ name: 'id', type: 'long' }] };
	const v2 = { ...v1, fields: [...v1.fields, { name: 'note', type: ['null', 'string'], default: null }] };
	const records = [
		wire(await register('shop.orders-value', v1), v1, { id: 9007199254740993n }),
		wire(await register('shop.orders-value', v2), v2, { id: -9007199254740995n, note: null }),
	];
	for (const [name, r] of [['without', new SchemaRegistry({ host: url })], ['with', registry]]) {
		for (const record of records) {
			try {
				const { id } = await r.decode(record);
				console.log(`${name} the hook: ${typeof id} ${id}`);
			} catch (e) {
				console.log(`${name} the hook: ${e.message}`);
			}
		}
	}
}

main().catch((e) => {
	console.error(e.stack);
	process.exit(1);
});
