\set id random(1, 2000000000)
INSERT INTO outbox_copy (topic, key, payload) VALUES ('orders', (:id % 10000)::text, convert_to(bench_payload(:id)::text, 'UTF8'));
