"""Enqueue events with psycopg2 the ways it sends by default, for
t/020_drivers.pl.

Usage: psycopg2_enqueue.py DSN TOPIC MODE

MODE "events": in one transaction that commits, a str, bytes and
Json(dict) payloads, with key and headers, called with positional and with
named arguments; then in one that rolls back, three more.  Prints one JSON
line per committed event: {"key": ..., "payload": hex, "headers": {...}}.

MODE "probe": one call with a Json(dict) payload; prints "ok" or the
SQLSTATE of the error.

MODE "avro" (TOPIC of format avro, its value schema a record with a long
"id"): a Json(dict) payload as the driver sends it, then cast to jsonb in
the statement, each in a transaction of its own; prints "ok", or the
SQLSTATE and message of the error, for each.
"""

import json
import sys

import psycopg2
from psycopg2.extras import Json

dsn, topic, mode = sys.argv[1:4]
conn = psycopg2.connect(dsn)
cur = conn.cursor()

if mode == "probe":
    try:
        cur.execute("SELECT outbox_enqueue(%s, %s)", (topic, Json({"probe": 1})))
        print("ok")
    except psycopg2.Error as e:
        print(e.pgcode)
    conn.rollback()
    sys.exit(0)

if mode == "avro":
    for sql in ("SELECT outbox_enqueue(%s, %s, %s)", "SELECT outbox_enqueue(%s, %s::jsonb, %s)"):
        try:
            cur.execute(sql, (topic, Json({"id": 7}), "py"))
            conn.commit()
            print("ok")
        except psycopg2.Error as e:
            print(e.pgcode, e.diag.message_primary)
            conn.rollback()
    sys.exit(0)

document = {"order": 7, "items": [1, 2], "note": "caf\u00e9"}
committed = [
    # (SQL, parameters, key, payload bytes as published, headers)
    ("SELECT outbox_enqueue(%s, %s)",
     (topic, "pl\u00e1in str"), None, "pl\u00e1in str".encode(), {}),
    ("SELECT outbox_enqueue(%s, %s, %s, %s)",
     (topic, b"\x00\x01\xfe\xffbytes", "k-bytes", Json({"h": "bytes"})),
     "k-bytes", b"\x00\x01\xfe\xffbytes", {"h": "bytes"}),
    ("SELECT outbox_enqueue(%s, %s, %s, %s)",
     (topic, Json(document), "k-json", Json({"h": "json"})),
     "k-json", json.dumps(document).encode(), {"h": "json"}),
    ("SELECT outbox_enqueue(topic => %(t)s, payload => %(p)s, key => %(k)s, headers => %(h)s)",
     {"t": topic, "p": "named str", "k": "k-named", "h": Json({"h": "named"})},
     "k-named", b"named str", {"h": "named"}),
    ("SELECT outbox_enqueue(topic => %(t)s, key => %(k)s, payload => %(p)s)",
     {"t": topic, "p": Json({"named": True}), "k": "k-named-json"},
     "k-named-json", json.dumps({"named": True}).encode(), {}),
    ("SELECT outbox_enqueue(%s, payload => %s, key => %s)",
     (topic, b"named bytes", "k-named-bytes"),
     "k-named-bytes", b"named bytes", {}),
]
for sql, params, _, _, _ in committed:
    cur.execute(sql, params)
conn.commit()

cur.execute("SELECT outbox_enqueue(%s, %s, %s)", (topic, "rolled back", "k-rb1"))
cur.execute("SELECT outbox_enqueue(%s, %s, %s)", (topic, b"rolled back", "k-rb2"))
cur.execute("SELECT outbox_enqueue(%s, %s, %s)", (topic, Json({"rolled": "back"}), "k-rb3"))
conn.rollback()
conn.close()

for _, _, key, payload, headers in committed:
    print(json.dumps({"key": key, "payload": payload.hex(), "headers": headers}))
