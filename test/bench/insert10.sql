-- The walsender reference of latency.sh: a transaction of ten rows.
\set id random(1, 2000000000)
INSERT INTO app_outbox (topic, key, payload)
	SELECT 'orders', ((:id + i) % 10000)::text, bench_payload(:id + i)
	  FROM generate_series(1, 10) i;
