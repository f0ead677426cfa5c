--
-- What pg_dump keeps of the extension: the events of the log that the
-- claim has not read (each log table's filter, run here as pg_dump runs
-- it: past last_id, of a transaction in progress at the claim, or being
-- drained), every row of the retry table and of the caller-given event
-- ids, and the id sequence; not the reader row, the ledger or the
-- statistics, which a restored database starts afresh.
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox;
SELECT c::regclass AS dumped, cond <> '' AS filtered
  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond)
 WHERE e.extname = 'outbox'
 ORDER BY 1::text;

-- eight events, each of its own transaction
SELECT format('SELECT outbox_enqueue(%L, %L::text, key => %L, event_id => %L)', 'dump.t', 'e' || i,
			  'k' || (i % 2), CASE WHEN i = 6 THEN 'e0000000-0000-4000-8000-000000000006' END)
  FROM generate_series(1, 8) i
\gexec
-- 1 published, 2 failed (to the retry table), 3 released unsent (to the
-- retry table, pending); 4 to 8 unread
BEGIN;
SELECT id FROM outbox_claim(3);
SELECT outbox_mark_published('{1}', '{0}', '{10}', true);
SELECT outbox_mark_failed('{2}', '{"Broker: Not enough in-sync replicas"}', '{f}', 10, '1h', '1h', 0, NULL);
SELECT outbox_mark_released('{3}');
COMMIT;
-- the claim also read 4 and 5 while the transaction that wrote 4 was in
-- progress, and is draining the one that wrote 5 (the reader row as the
-- claim leaves it, written by hand)
UPDATE outbox_reader r
   SET last_id = 5,
	   running = ARRAY[(SELECT l.txid FROM outbox_log l WHERE l.id = 4)],
	   draining = ARRAY[(SELECT l.txid FROM outbox_log l WHERE l.id = 5)],
	   drain_after = 4, drain_upto = 5;

-- each table as pg_dump copies it: from the log 4 to 8, not 1 (published),
-- 2 and 3 (in the retry table, with the one caller-given id)
DO $$
DECLARE
	t record;
	dumped text;
BEGIN
	FOR t IN SELECT c::regclass AS rel, cond
			   FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond)
			  WHERE e.extname = 'outbox' ORDER BY 1::text
	LOOP
		IF t.rel::text = 'outbox_event_id_seq' THEN
			SELECT last_value::text INTO dumped FROM outbox_event_id_seq;
		ELSIF t.rel::text = 'outbox_topic_settings' THEN
			SELECT string_agg(pattern, ',' ORDER BY pattern) INTO dumped FROM outbox_topic_settings;
		ELSE
			EXECUTE format('SELECT string_agg(id::text, '','' ORDER BY id) FROM %s %s', t.rel, t.cond)
				INTO dumped;
		END IF;
		RAISE NOTICE '%: %', t.rel, coalesce(dumped, '-');
	END LOOP;
END
$$;

-- the filters name the schema: renaming it is refused, or every dump
-- would fail
BEGIN;
ALTER SCHEMA public RENAME TO elsewhere;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE

SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE EXTENSION outbox;
