-- A transaction of ten events.
\set id random(1, 2000000000)
SELECT count(outbox_enqueue('orders', bench_payload(:id + i), key => ((:id + i) % 10000)::text))
  FROM generate_series(1, 10) i;
