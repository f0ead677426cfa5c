\set id random(1, 2000000000)
INSERT INTO relay_outbox (topic, key, payload) VALUES ('relay', (:id % 10000)::text, convert_to(bench_payload(:id)::text, 'UTF8'));
