\set id random(1, 2000000000)
WITH o AS (INSERT INTO orders (id, customer, total) VALUES (:id, 'customer-' || (:id % 1000), 39.98) ON CONFLICT DO NOTHING RETURNING id)
SELECT outbox_enqueue('orders', bench_payload(id), key => (id % 10000)::text) FROM o;
