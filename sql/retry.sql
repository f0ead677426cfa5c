--
-- Retry, replay and abandon by hand, and the dead-letter topic.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;
ALTER SEQUENCE outbox_event_id_seq RESTART WITH 1;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';

SELECT count(outbox_enqueue(t, 'e'::text, key => 'k')) FROM unnest('{a,a,b,b,c}'::text[]) t;
-- 1 and 3 abandoned for good, 2 failed once, 4 and 5 pending
SELECT outbox_mark_failed('{1,3}', '{"Broker: Topic authorization failed","Broker: Topic authorization failed"}',
						  '{t,t}', 10, '1min', '1h', 0, '');
SELECT outbox_mark_failed('{2}', '{"Local: Message timed out"}', '{f}', 10, '1min', '1h', 0, '');

-- outbox_retry: a failed or abandoned event is due again, attempts reset
SELECT outbox_retry(1) AS abandoned_one, outbox_retry(2) AS failed_one,
	   outbox_retry(4) AS pending_one, outbox_retry(99) AS missing_one;
SELECT id, status, attempts, next_attempt_at, last_error FROM outbox_messages ORDER BY id;
BEGIN;
SELECT id FROM outbox_claim(10);
ROLLBACK;

-- outbox_retry_abandoned: all of them, or those of one topic
SELECT outbox_mark_failed('{1,2,3,5}', '{x,x,x,x}', '{t,t,t,t}', 10, '1min', '1h', 0, '');
SELECT outbox_retry_abandoned('c') AS topic_c;
SELECT outbox_retry_abandoned('nope') AS no_topic;
SELECT outbox_retry_abandoned() AS all_topics;
SELECT status, count(*) FROM outbox_messages GROUP BY status;

-- one statement charges events whose attempts differ: each is judged by
-- its own count (max_attempts 3: the one at 2 is abandoned, not the others)
SELECT array_agg(outbox_enqueue('charge', 'e'::text, key => k) ORDER BY k) AS charged
  FROM unnest('{a,b,c}'::text[]) k \gset
SELECT outbox_mark_failed((:'charged'::bigint[])[1:1], '{e}', '{f}', 3, '1min', '1h', 0, '');
SELECT outbox_mark_failed((:'charged'::bigint[])[1:1], '{e}', '{f}', 3, '1min', '1h', 0, '');
SELECT outbox_mark_failed(:'charged'::bigint[], '{e,e,e}', '{f,f,f}', 3, '1min', '1h', 0, '');
SELECT key, status, attempts, next_attempt_at IS NULL AS no_next
  FROM outbox_messages WHERE topic = 'charge' ORDER BY id;

-- outbox_abandon: gives up on purpose, and releases the key
SELECT outbox_mark_failed('{1}', '{"Local: Message timed out"}', '{f}', 10, '1min', '1h', 0, '');
BEGIN;
SELECT id, key FROM outbox_claim(10) WHERE key = 'k' AND id <= 2;
ROLLBACK;
SELECT outbox_abandon(1) AS abandoned, outbox_abandon(1) AS again, outbox_abandon(99) AS missing;
SELECT id, status, last_error FROM outbox_messages WHERE id = 1;
BEGIN;
SELECT id, key FROM outbox_claim(10) WHERE key = 'k' AND id <= 2;
ROLLBACK;
SELECT outbox_mark_published('{2}', '{0}', '{0}', true);
SELECT outbox_abandon(2) AS published_one;

-- a dead-letter topic gets a copy of each newly abandoned event
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
SELECT outbox_enqueue('orders', '{"id": 1}'::jsonb, key => '1', headers => '{"trace": "t1"}') AS orig \gset
SELECT outbox_enqueue('dead.letters', 'already dead'::text) AS dlt_event \gset
SELECT outbox_mark_failed(ARRAY[:orig, :dlt_event]::bigint[], '{"Broker: Topic authorization failed","boom"}',
						  '{t,t}', 10, '1min', '1h', 0, 'dead.letters');
SELECT topic, key, convert_from(payload, 'UTF8') AS payload,
	   headers - 'original_event_id' AS headers, status,
	   headers ->> 'original_event_id' = (SELECT event_id::text FROM outbox_messages WHERE id = :orig) AS original_event_id
  FROM outbox_messages WHERE id > :dlt_event ORDER BY id;
-- a failed, not abandoned, event is not sent there
SELECT outbox_enqueue('orders', '{"id": 2}'::jsonb) AS second \gset
SELECT outbox_mark_failed(ARRAY[:second]::bigint[], '{"Local: Message timed out"}', '{f}', 10, '1min', '1h', 0, 'dead.letters');
SELECT count(*) AS dead_letters FROM outbox_messages WHERE topic = 'dead.letters' AND status = 'pending';

-- retention: published and abandoned rows past their age go, the rest stays
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
INSERT INTO outbox_retries (topic, payload, status, published_at, created_at) VALUES
	('r', 'old published', 'published', now() - interval '8 days', now() - interval '8 days'),
	('r', 'new published', 'published', now() - interval '1 day', now() - interval '9 days'),
	('r', 'old abandoned', 'abandoned', NULL, now() - interval '31 days'),
	('r', 'new abandoned', 'abandoned', NULL, now() - interval '29 days'),
	('r', 'old pending', 'pending', NULL, now() - interval '60 days');
SELECT outbox_purge() AS removed;
SELECT convert_from(payload, 'UTF8') AS kept FROM outbox_messages ORDER BY id;
SELECT outbox_purge_batch('1 hour', '1 hour', 1) AS one_each;
SELECT convert_from(payload, 'UTF8') AS kept FROM outbox_messages ORDER BY id;

-- the log is emptied a table at a time, by TRUNCATE, once every event in
-- it is read and was published longer ago than the retention; enqueue
-- moves on to the next table once the current one is old enough
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
SELECT count(outbox_enqueue('r', 'e'::text, event_id => gen_random_uuid())) FROM generate_series(1, 3);
UPDATE outbox_reader SET current_log = 0, current_since = now() - interval '1 hour';
SELECT outbox_rotate('1 minute') AS removed;
SELECT current_log FROM outbox_reader;
-- not read yet: kept
SELECT outbox_rotate('0') AS removed;
BEGIN;
SELECT outbox_mark_published(array_agg(id), array_fill(0, ARRAY[count(*)::integer]), array_agg(id), true)
  FROM outbox_claim(10);
COMMIT;
SELECT count(*) AS published FROM outbox_messages WHERE status = 'published';
-- published within the retention: kept
SELECT outbox_rotate('1 hour') AS removed;
SELECT outbox_rotate('0') AS removed;
SELECT count(*) AS left_in_log FROM outbox_log;
SELECT count(*) AS ledger_rows, (SELECT count(*) FROM outbox_event_ids) AS event_ids FROM outbox_ledger;
