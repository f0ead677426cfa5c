#!/usr/bin/python3
"""The baseline relay: an outbox relay of the kind users write today.

It claims batches of 1000 unpublished rows with FOR UPDATE SKIP LOCKED,
produces them asynchronously (idempotent producer, acks=all), waits for the
delivery reports, marks the delivered rows with one UPDATE per batch and
commits.  It polls every POLL_MS when there is nothing to do.

Usage: relay.py DSN BROKERS POLL_MS (drain | run SECONDS)
  drain: exit once the table is empty of unpublished rows
  run:   keep relaying for SECONDS
"""

import sys
import time

import psycopg2
from confluent_kafka import Producer

CLAIM = """
    SELECT id, event_id::text, topic, key, payload
      FROM relay_outbox
     WHERE published_at IS NULL
     ORDER BY id
     LIMIT 1000
       FOR UPDATE SKIP LOCKED
"""
MARK = "UPDATE relay_outbox SET published_at = clock_timestamp() WHERE id = ANY(%s)"


def main():
    dsn, brokers, poll_ms, mode = sys.argv[1:5]
    until = time.time() + float(sys.argv[5]) if mode == "run" else None
    conn = psycopg2.connect(dsn)
    producer = Producer({"bootstrap.servers": brokers, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5,
                         "socket.nagle.disable": True})
    cur = conn.cursor()
    while until is None or time.time() < until:
        cur.execute(CLAIM)
        rows = cur.fetchall()
        if not rows:
            conn.commit()
            if mode == "drain":
                break
            time.sleep(int(poll_ms) / 1000)
            continue
        delivered = []

        def report(err, msg, row_id):
            if err is None:
                delivered.append(row_id)

        for row_id, event_id, topic, key, payload in rows:
            producer.produce(topic, value=bytes(payload), key=key,
                             headers={"event_id": event_id},
                             on_delivery=lambda err, msg, row_id=row_id: report(err, msg, row_id))
        producer.flush()
        cur.execute(MARK, (delivered,))
        conn.commit()


if __name__ == "__main__":
    main()
