\set id random(1, 2000000000)
WITH o AS (INSERT INTO orders (id, customer, total) VALUES (:id, 'customer-' || (:id % 1000), 39.98) ON CONFLICT DO NOTHING RETURNING id)
INSERT INTO outbox_copy (topic, key, payload) SELECT 'orders', (id % 10000)::text, convert_to(bench_payload(id)::text, 'UTF8') FROM o;
