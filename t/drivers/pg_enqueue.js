// Enqueue events with node's pg driver and untyped parameters, for
// t/020_drivers.pl.  pg is looked for in node_modules beside this file.
//
// Usage: node pg_enqueue.js HOST PORT DATABASE USER TOPIC MODE
//
// MODE "events": in one transaction that commits, a string, an object (pg
// sends JSON.stringify of it) and a Buffer cast to bytea, with key and
// headers, positional and named; then in one that rolls back, two more.
// Prints one JSON line per committed event: {"key", "payload": hex,
// "headers"}.
//
// MODE "probe": one call with an untyped string parameter; prints "ok" or
// the SQLSTATE of the error.
//
// MODE "buffer": one call with an untyped Buffer parameter that is not
// UTF-8; prints "ok" or the SQLSTATE of the error.
//
// MODE "avro" (TOPIC of format avro, its value schema a record with a long
// "id"): an object as the driver sends it, then cast to jsonb in the
// statement; prints "ok", or the SQLSTATE and message of the error, for
// each.

'use strict';

const path = require('path');
const { Client } = require(path.join(__dirname, 'node_modules', 'pg'));

async function main() {
  const [host, port, database, user, topic, mode] = process.argv.slice(2);
  const client = new Client({ host, port: Number(port), database, user });
  await client.connect();
  try {
    if (mode === 'probe' || mode === 'buffer') {
      const payload = mode === 'probe' ? 'probe' : Buffer.from([0xff, 0xfe]);
      try {
        await client.query('SELECT outbox_enqueue($1, $2)', [topic, payload]);
        console.log('ok');
      } catch (e) {
        console.log(e.code);
      }
      return;
    }

    if (mode === 'avro') {
      for (const sql of ['SELECT outbox_enqueue($1, $2, $3)', 'SELECT outbox_enqueue($1, $2::jsonb, $3)']) {
        try {
          await client.query(sql, [topic, { id: 7 }, 'js']);
          console.log('ok');
        } catch (e) {
          console.log(`${e.code} ${e.message}`);
        }
      }
      return;
    }

    const doc = { order: 7, items: [1, 2], note: 'caf\u00e9' };
    const committed = [
      // [SQL, parameters, key, payload bytes as published, headers]
      ['SELECT outbox_enqueue($1, $2)', [topic, 'pl\u00e1in string'],
        null, Buffer.from('pl\u00e1in string'), {}],
      ['SELECT outbox_enqueue($1, $2, $3, $4)', [topic, doc, 'k-object', { h: 'object' }],
        'k-object', Buffer.from(JSON.stringify(doc)), { h: 'object' }],
      ['SELECT outbox_enqueue(topic => $1, payload => $2, key => $3, headers => $4)',
        [topic, 'named string', 'k-named', { h: 'named' }],
        'k-named', Buffer.from('named string'), { h: 'named' }],
      ['SELECT outbox_enqueue($1, $2::bytea, key => $3)',
        [topic, Buffer.from([0, 1, 0xfe, 0xff]), 'k-buffer'],
        'k-buffer', Buffer.from([0, 1, 0xfe, 0xff]), {}],
    ];
    await client.query('BEGIN');
    for (const [sql, params] of committed) {
      await client.query(sql, params);
    }
    await client.query('COMMIT');

    await client.query('BEGIN');
    await client.query('SELECT outbox_enqueue($1, $2, $3)', [topic, 'rolled back', 'k-rb1']);
    await client.query('SELECT outbox_enqueue($1, $2, $3)', [topic, { rolled: 'back' }, 'k-rb2']);
    await client.query('ROLLBACK');

    for (const [, , key, payload, headers] of committed) {
      console.log(JSON.stringify({ key, payload: payload.toString('hex'), headers }));
    }
  } finally {
    await client.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
