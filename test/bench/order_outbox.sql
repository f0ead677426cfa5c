-- The same transaction with the outbox table users write by hand
-- (app_outbox, setup.sql): the baseline of the enqueue's cost.
\set id random(1, 2000000000)
BEGIN;
INSERT INTO orders (id, customer, total) VALUES (:id, 'customer-' || (:id % 1000), 39.98) ON CONFLICT DO NOTHING;
INSERT INTO app_outbox (topic, key, payload) VALUES ('orders', (:id % 10000)::text, bench_payload(:id));
END;
