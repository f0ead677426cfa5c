-- The walsender reference of latency.sh: the event as a row of the
-- outbox table users write by hand, for a logical decoding slot to read.
\set id random(1, 2000000000)
INSERT INTO app_outbox (topic, key, payload)
	VALUES ('orders', (:id % 10000)::text, bench_payload(:id));
