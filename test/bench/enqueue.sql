\set id random(1, 2000000000)
SELECT outbox_enqueue('orders', bench_payload(:id), key => (:id % 10000)::text);
