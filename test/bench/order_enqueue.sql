-- An application transaction: a business row and its event, with
-- outbox_enqueue.
\set id random(1, 2000000000)
BEGIN;
INSERT INTO orders (id, customer, total) VALUES (:id, 'customer-' || (:id % 1000), 39.98) ON CONFLICT DO NOTHING;
SELECT outbox_enqueue('orders', bench_payload(:id), key => (:id % 10000)::text);
END;
