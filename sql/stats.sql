--
-- outbox_stats on fixed data, the latency histogram, and
-- outbox_worker_status() without the library preloaded.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;

-- histogram buckets: floor(4 * log2(1 + ms)); quantiles are bucket bounds
SELECT array_positions(outbox_latency_histogram('{0, 0.5, 1, 10, 100, 1000, 1e12}'), 1) AS buckets;
SELECT array_length(outbox_latency_histogram('{}'), 1) AS length,
	   outbox_histogram_quantile(outbox_latency_histogram('{}'), 0.99) AS empty_quantile;
SELECT outbox_histogram_quantile(h, 0.5) AS p50, outbox_histogram_quantile(h, 0.99) AS p99
  FROM (SELECT outbox_latency_histogram(array_agg(ms)) AS h
		  FROM (SELECT 10::float8 AS ms FROM generate_series(1, 98)
				UNION ALL SELECT 100 UNION ALL SELECT 1000) s) s;
SELECT outbox_histogram_add('{1,2,3}', '{10,20}') AS added,
	   outbox_histogram_sum(h) AS summed
  FROM (VALUES ('{1,1}'::bigint[]), ('{0,2,5}')) v(h);

-- the queue: topic a has a pending event in the log, a failed one due, one
-- not due; topic b one abandoned event, and published rows (not counted:
-- see stats)
SELECT outbox_enqueue('a', 'x'::text, key => 'k') > 0 AS enqueued;
INSERT INTO outbox_retries (topic, key, payload, status, attempts, next_attempt_at, created_at) VALUES
	('a', 'k', 'x', 'failed', 2, now() + interval '1 min', now() - interval '10 min'),
	('a', 'j', 'x', 'failed', 1, now() - interval '1 s', now() - interval '7 min'),
	('b', NULL, 'x', 'abandoned', 10, NULL, now() - interval '1 day'),
	('b', NULL, 'x', 'published', 1, NULL, now() - interval '1 hour');
-- deliveries: a now and 10 minutes ago; b 30 s ago; c 2 hours ago (too old)
INSERT INTO outbox_publish_stats (topic, bucket, published, failed, abandoned, latency_ms_sum, latency_histogram)
SELECT 'a', date_bin('10 seconds', now(), 'epoch'), 90, 5, 0, 900,
	   outbox_latency_histogram(array_fill(10::float8, ARRAY[90]))
UNION ALL
SELECT 'a', date_bin('10 seconds', now(), 'epoch') - interval '10 min', 10, 4, 1, 10100,
	   outbox_latency_histogram(array_fill(100::float8, ARRAY[9]) || 9200::float8)
UNION ALL
SELECT 'b', date_bin('10 seconds', now(), 'epoch') - interval '30 s', 50, 0, 0, 50,
	   outbox_latency_histogram(array_fill(1::float8, ARRAY[50]))
UNION ALL
SELECT 'c', date_bin('10 seconds', now(), 'epoch') - interval '2 hours', 1000, 1000, 0, 1000,
	   outbox_latency_histogram(array_fill(1::float8, ARRAY[1000]));

SELECT topic, pending, failed, abandoned,
	   oldest_due_age BETWEEN '7 min' AND '8 min' AS oldest_due_7min,
	   published_last_minute, published_last_hour, failed_attempts_last_hour,
	   abandoned_last_hour, retry_rate, latency_avg_ms, latency_p99_ms
  FROM outbox_stats;

-- an empty outbox has a total row of zeros
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;
SELECT * FROM outbox_stats;

-- a reader row that lists a hundred running and a hundred draining
-- transactions, as a claim made while that many wrote leaves it, is read
-- whole: by monitoring, and by a claim that finds it moved since
SELECT count(outbox_enqueue('many', 'x'::text)) AS enqueued FROM generate_series(1, 1000);
UPDATE outbox_reader
   SET last_id = 0, drain_upto = 0, drain_after = 0,
	   running = (SELECT array_agg(x::text::xid8) FROM generate_series(1000, 1099) x),
	   draining = (SELECT array_agg(x::text::xid8) FROM generate_series(2000, 2099) x);
SELECT topic, unread FROM outbox_unread_topics() ORDER BY topic;
SELECT topic, pending FROM outbox_stats;
BEGIN;
SELECT count(*) AS claimed, min(topic) AS topic FROM outbox_claim(10);
ROLLBACK;
SELECT cardinality(running) AS running, cardinality(draining) AS draining FROM outbox_reader;
TRUNCATE outbox_log;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';

-- the worker's status, from shared memory: this database's worker is off
-- (a server's other databases may have workers of their own)
SELECT database = current_database() AS this_database, pid, state, last_error
  FROM outbox_worker_status() WHERE database = current_database();
