\set id random(1, 2000000000)
INSERT INTO orders (id, customer, total) VALUES (:id, 'customer-' || (:id % 1000), 39.98) ON CONFLICT DO NOTHING;
