--
-- The worker's state machine in SQL, driven by hand: claim, mark published,
-- mark failed with backoff, abandon, and the order-per-key rule.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
ALTER SEQUENCE outbox_event_id_seq RESTART WITH 1;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';

-- the retry delay: base * 2^(attempts-1), capped, no jitter
SELECT a, outbox_retry_delay(a, '1s', '5min', 0) AS delay
  FROM generate_series(0, 10) a;
SELECT outbox_retry_delay(1000000, '1s', '5min', 0) AS huge_attempts;
-- jitter spreads the delay within +/- the fraction
SELECT min(d) >= '7.5s' AND max(d) <= '12.5s' AND min(d) < max(d) AS within_jitter
  FROM (SELECT outbox_retry_delay(1, '10s', '1min', 0.25) AS d
		  FROM generate_series(1, 200)) s;

-- claim takes due events in id order, up to the batch size; every event
-- it took from the log must have its outcome recorded before commit
SELECT outbox_enqueue('t', ('e' || i)::text, key => 'k' || (i % 3)) FROM generate_series(1, 6) i;
SELECT outbox_enqueue('t', 'no key'::text);
BEGIN;
SELECT id, key, convert_from(payload, 'UTF8') AS payload FROM outbox_claim(4);
SELECT outbox_mark_published('{1,2}', '{0,3}', '{10,11}', true);
COMMIT;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT id FROM outbox_claim(4);
SELECT outbox_mark_published('{1,2}', '{0,3}', '{10,11}', true);
-- 3 and 4 were not sent: due again, no attempt counted
SELECT outbox_mark_released('{3,4}');
COMMIT;
SELECT id, status, attempts, kafka_partition, kafka_offset, published_at IS NOT NULL AS has_published_at
  FROM outbox_messages ORDER BY id;

-- a refused delivery: failed, attempts + 1, error text, retry after the delay
BEGIN;
SELECT id FROM outbox_claim(1);
SELECT outbox_mark_failed('{3}', '{"Broker: Not enough in-sync replicas"}', '{f}',
						  3, '10s', '5min', 0, '');
COMMIT;
SELECT id, status, attempts, last_error,
	   next_attempt_at - clock_timestamp() BETWEEN '9s' AND '10s' AS retry_in_10s
  FROM outbox_messages WHERE id = 3;

-- event 6 has the same key (k0) as failed event 3: it waits for 3's retry,
-- while events of other keys and without key go on
BEGIN;
SELECT id, key FROM outbox_claim(100);
ROLLBACK;

-- once 3 is due again it is claimed; 6, behind it, waits in the retry
-- table for the next batch
UPDATE outbox_retries SET next_attempt_at = now() - interval '1s' WHERE id = 3;
BEGIN;
SELECT id, key FROM outbox_claim(100);
SELECT id, status FROM outbox_retries WHERE id = 6;

-- the last attempt abandons; so does an error that retrying cannot fix
SELECT outbox_mark_failed('{3}', '{"Local: Message timed out"}', '{f}', 3, '10s', '5min', 0, '');
SELECT outbox_mark_failed('{4}', '{"Broker: Topic authorization failed"}', '{t}', 3, '10s', '5min', 0, '');
SELECT outbox_mark_released('{5,7}');
COMMIT;
SELECT outbox_mark_failed('{3}', '{"Local: Message timed out"}', '{f}', 3, '10s', '5min', 0, '');
SELECT id, status, attempts, last_error, next_attempt_at
  FROM outbox_messages WHERE id IN (3, 4) ORDER BY id;

-- an abandoned event no longer holds its key back
BEGIN;
SELECT id, key FROM outbox_claim(100);

-- with outbox.published_retention = 0 delivered events are deleted
SELECT outbox_mark_published('{5,6}', '{0,0}', '{1,2}', true);
SELECT outbox_mark_published('{7}', '{0}', '{3}', false);
COMMIT;
SELECT NOT EXISTS (SELECT FROM outbox_messages WHERE id = 7) AS deleted_on_delivery;
-- also when they come from the log
SELECT outbox_enqueue('t', 'gone'::text) AS gone \gset
BEGIN;
SELECT id = :gone AS claimed_gone FROM outbox_claim(100);
SELECT outbox_mark_published(ARRAY[:gone]::bigint[], '{0}', '{4}', false);
COMMIT;
SELECT NOT EXISTS (SELECT FROM outbox_messages WHERE id = :gone) AS deleted_on_delivery;

-- nothing due: nothing claimed
SELECT count(*) AS claimed FROM outbox_claim(100);
SELECT status, count(*) FROM outbox_messages GROUP BY status ORDER BY status;

-- every outcome was counted in the statistics
SELECT topic, sum(published) AS published, sum(failed) AS failed, sum(abandoned) AS abandoned
  FROM outbox_publish_stats GROUP BY topic;

-- a batch is bounded by bytes too, but holds at least one event
SELECT count(outbox_enqueue('big', repeat('x', 100), key => 'b' || i)) FROM generate_series(1, 3) i;
BEGIN;
SELECT count(*) AS claimed FROM outbox_claim(100, 200);
ROLLBACK;
BEGIN;
SELECT count(*) AS claimed FROM outbox_claim(100, 1);
ROLLBACK;

-- the readers of the log refuse what a caller could make up
SELECT * FROM outbox_log_rows(ARRAY[1, NULL]);
SELECT * FROM outbox_log_rows('{{1},{2}}');
-- (what is unread is what the reader row says now: its count takes no input)
SELECT topic, unread FROM outbox_unread_topics() ORDER BY topic;
SELECT * FROM outbox_claim(-1);
-- and find by id what is there, in id order, whichever table holds it
SELECT count(outbox_enqueue('lookup', 'l' || i)) FROM generate_series(1, 3) i;
SELECT l.topic, convert_from(l.payload, 'UTF8') AS payload
  FROM outbox_log_rows((SELECT array_agg(id ORDER BY id DESC) FROM outbox_log WHERE topic = 'lookup') || 0::bigint) l;

-- a claim reads the events it returns, not the backlog: the log tables are
-- never analyzed, and a planned query was seen to sort all of them
TRUNCATE outbox_log;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';
SELECT count(outbox_enqueue('backlog', 'b' || i)) FROM generate_series(1, 2000) i;
SELECT pg_stat_force_next_flush();	-- the counts below are the claim's only
BEGIN;
SELECT count(*) AS claimed FROM outbox_claim(10);
SELECT sum(seq_tup_read) AS rows_scanned, sum(idx_tup_fetch) <= 11 AS read_batch_and_one_more
  FROM pg_stat_xact_all_tables WHERE relname LIKE 'outbox\_log\__';
ROLLBACK;

-- the count of claimed events still to record follows savepoints: a claim
-- rolled back needs no record, a record rolled back must be made again
TRUNCATE outbox_log, outbox_retries;
SELECT count(outbox_enqueue('sp', 's' || i)) FROM generate_series(1, 6) i;
BEGIN;
SAVEPOINT a;
SELECT count(*) AS claimed FROM outbox_claim(2);
ROLLBACK TO SAVEPOINT a;
COMMIT;
BEGIN;
SELECT array_agg(id ORDER BY id) AS ids FROM outbox_claim(2) \gset
SAVEPOINT b;
SELECT outbox_mark_published(:'ids', '{0,0}', '{1,2}', true);
ROLLBACK TO SAVEPOINT b;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SAVEPOINT c;
SELECT array_agg(id ORDER BY id) AS ids FROM outbox_claim(2) \gset
RELEASE SAVEPOINT c;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SAVEPOINT d;
SELECT array_agg(id ORDER BY id) AS ids FROM outbox_claim(2) \gset
SAVEPOINT e;
SELECT outbox_mark_published(:'ids', '{0,0}', '{1,2}', true);
RELEASE SAVEPOINT e;
RELEASE SAVEPOINT d;
COMMIT;
SELECT string_agg(convert_from(payload, 'UTF8'), ' ' ORDER BY id) AS published
  FROM outbox_messages WHERE topic = 'sp' AND status = 'published';

-- the claim finds the reader row where its last update put it: the row's
-- old versions, which a snapshot held elsewhere keeps, are not read again
-- for every batch (one scan for the update by hand, one for the first
-- claim after it)
TRUNCATE outbox_log;
SELECT count(outbox_enqueue('tid', 't' || i)) FROM generate_series(1, 6) i;
SELECT pg_stat_force_next_flush();	-- the count below is this block's only
BEGIN;
UPDATE outbox_reader SET drain_after = drain_after;
SELECT outbox_mark_published(array_agg(id), array_fill(0, ARRAY[count(*)::integer]),
							 array_agg(id), true) FROM outbox_claim(2);
SELECT outbox_mark_published(array_agg(id), array_fill(0, ARRAY[count(*)::integer]),
							 array_agg(id), true) FROM outbox_claim(2);
SELECT outbox_mark_published(array_agg(id), array_fill(0, ARRAY[count(*)::integer]),
							 array_agg(id), true) FROM outbox_claim(2);
SELECT pg_stat_get_xact_numscans('outbox_reader'::regclass) AS reader_scans;
COMMIT;
SELECT count(*) AS published FROM outbox_messages WHERE topic = 'tid' AND status = 'published';
-- and finds it still when the table was rewritten under it (VACUUM FULL):
-- the place it last saw may be past the end of the table now
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		UPDATE outbox_reader SET drain_after = drain_after;
	END LOOP;
END
$$;
TRUNCATE outbox_log;
SELECT count(outbox_enqueue('rewrite', 'r' || i)) FROM generate_series(1, 2) i;
BEGIN;
SELECT outbox_mark_published(array_agg(id), '{0}', array_agg(id), true) FROM outbox_claim(1);
COMMIT;
SELECT pg_relation_size('outbox_reader') > 8192 AS reader_spans_pages;
VACUUM FULL outbox_reader;
BEGIN;
SELECT outbox_mark_published(array_agg(id), '{0}', array_agg(id), true) FROM outbox_claim(1);
COMMIT;
SELECT count(*) AS published FROM outbox_messages WHERE topic = 'rewrite' AND status = 'published';

-- a second claim in the transaction does not take again what the first
-- returned and is not recorded yet: rows of the retry table that this
-- transaction has locked are no others' (SKIP LOCKED passes them)
TRUNCATE outbox_log, outbox_retries;
SELECT count(outbox_enqueue('again', 'a' || i, key => 'k' || i)) FROM generate_series(1, 2) i;
BEGIN;
SELECT outbox_mark_released(array_agg(id)) FROM outbox_claim(2);
COMMIT;
BEGIN;
SELECT array_agg(id ORDER BY id) AS first_claim FROM outbox_claim(1) \gset
SELECT array_agg(id ORDER BY id) AS second_claim FROM outbox_claim(1) \gset
SELECT :'first_claim' <> :'second_claim' AS not_claimed_twice;
SELECT outbox_mark_published(:'first_claim'::bigint[] || :'second_claim'::bigint[], '{0,0}', '{1,2}', true);
COMMIT;
SELECT string_agg(convert_from(payload, 'UTF8'), ' ' ORDER BY id) AS published
  FROM outbox_messages WHERE topic = 'again' AND status = 'published';
