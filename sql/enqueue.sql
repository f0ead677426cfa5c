--
-- outbox_enqueue: signatures, payload bytes, transactions, bad input,
-- settings.  Runs without shared_preload_libraries: enqueue must not need it.
--
CREATE EXTENSION IF NOT EXISTS outbox;

-- the objects, all named outbox_*
SELECT pg_describe_object(classid, objid, objsubid) AS object
  FROM pg_depend
 WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'outbox')
   AND deptype = 'e'
 ORDER BY 1;

\df outbox_enqueue
\d outbox_messages

-- payload types: what will be published is stored as bytes
SELECT outbox_enqueue('orders', '{"b": 2, "a": [1, 2.50, "x"]}'::jsonb, key => '1') AS id \gset
SELECT id = :id AS same_id, topic, key, convert_from(payload, 'UTF8') AS payload, headers,
	   status, attempts, next_attempt_at, last_error, published_at, kafka_partition,
	   kafka_offset, event_id IS NOT NULL AS has_event_id, created_at <= now() AS created_before_now
  FROM outbox_messages WHERE id = :id;

SELECT outbox_enqueue('orders', 'plain text é'::text, key => '2');
SELECT outbox_enqueue('orders', '\x00ff10'::bytea, key => '3');
-- an untyped literal resolves to the text variant
SELECT outbox_enqueue('orders', 'untyped');
SELECT outbox_enqueue('orders', payload => '{"named": true}'::jsonb,
					  headers => '{"trace": "abc", "source": "test"}');
SELECT id, key, payload, headers FROM outbox_messages ORDER BY id;

-- a NULL payload is a tombstone, which needs a key
SELECT outbox_enqueue('orders', NULL::jsonb, key => '1') AS tombstone \gset
SELECT key, payload IS NULL AS is_tombstone FROM outbox_messages WHERE id = :tombstone;
SELECT outbox_enqueue('orders', NULL::text);
\echo :LAST_ERROR_SQLSTATE

-- a caller-given event_id is kept, and is unique
SELECT outbox_enqueue('orders', '{}'::jsonb,
					  event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11') AS given \gset
SELECT event_id FROM outbox_messages WHERE id = :given;
SELECT outbox_enqueue('orders', '{}'::jsonb,
					  event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
\echo :LAST_ERROR_SQLSTATE
-- generated ids differ
SELECT count(DISTINCT event_id) = count(*) AS all_distinct FROM outbox_messages;

-- the insert goes past the executor, but a read-only transaction still
-- cannot enqueue
BEGIN READ ONLY;
SELECT outbox_enqueue('orders', '{}'::jsonb);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- the row exists only if the transaction commits
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
BEGIN;
SELECT outbox_enqueue('tx', 'rolled back'::text) > 0 AS enqueued;
ROLLBACK;
BEGIN;
SELECT outbox_enqueue('tx', 'kept 1'::text) > 0 AS enqueued;
SAVEPOINT s;
SELECT outbox_enqueue('tx', 'rolled back to savepoint'::text) > 0 AS enqueued;
ROLLBACK TO SAVEPOINT s;
SELECT outbox_enqueue('tx', 'kept 2'::text) > 0 AS enqueued;
COMMIT;
SELECT convert_from(payload, 'UTF8') AS payload FROM outbox_messages ORDER BY id;

-- bad topics: 22023, nothing stored
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
SELECT outbox_enqueue(NULL, 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue(repeat('t', 250), 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders/eu', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('ordérs', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('with space', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('..', 'x'::text);
\echo :LAST_ERROR_SQLSTATE
-- the longest name and every allowed character are fine
SELECT outbox_enqueue(repeat('t', 249), 'x'::text) > 0 AS ok;
SELECT outbox_enqueue('Orders.EU_v2-x', 'x'::text) > 0 AS ok;

-- bad headers: 22023
SELECT outbox_enqueue('orders', 'x'::text, headers => '["a", "b"]');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '"a"');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '{"n": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '{"ok": "yes", "nested": {"a": "b"}}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '{"n": null}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '{"event_id": "mine"}');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', 'x'::text, headers => '{}') > 0 AS empty_headers_ok;

-- payload size limit: 54000
SET outbox.max_message_bytes = 10;
SELECT outbox_enqueue('orders', '0123456789'::text) > 0 AS at_limit_ok;
SELECT outbox_enqueue('orders', '0123456789A'::text);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', '"12345678"'::jsonb) > 0 AS at_limit_ok;
SELECT outbox_enqueue('orders', '"123456789"'::jsonb);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('orders', '\x0102030405060708090a0b'::bytea);
\echo :LAST_ERROR_SQLSTATE
-- é is two bytes in UTF-8: the limit counts bytes
SELECT outbox_enqueue('orders', 'ééééé'::text) > 0 AS at_limit_ok;
SELECT outbox_enqueue('orders', 'éééééx'::text);
\echo :LAST_ERROR_SQLSTATE
-- key and headers count too (a header costs 10 bytes beside name and value)
SELECT outbox_enqueue('orders', '01234'::text, key => '56789') > 0 AS at_limit_ok;
SELECT outbox_enqueue('orders', '01234'::text, key => '567890');
\echo :LAST_ERROR_SQLSTATE
SET outbox.max_message_bytes = 30;
SELECT outbox_enqueue('orders', '0123456789'::text, headers => '{"h": "123456789"}') > 0 AS at_limit_ok;
SELECT outbox_enqueue('orders', '0123456789'::text, headers => '{"h": "1234567890"}');
\echo :LAST_ERROR_SQLSTATE
RESET outbox.max_message_bytes;

-- only the valid events were stored
SELECT left(topic, 20) AS topic, length(topic), convert_from(payload, 'UTF8') AS payload
  FROM outbox_messages ORDER BY id;

-- event ids are version 4 UUIDs, each its own, across the refills of the
-- pool of random bytes they are drawn from (4 kB: 256 ids)
CREATE TEMP TABLE pooled AS
SELECT outbox_enqueue('pooled', to_jsonb(i)) AS id FROM generate_series(1, 600) i;
SELECT count(DISTINCT m.event_id) AS distinct_ids,
	   bool_and(substr(m.event_id::text, 15, 1) = '4' AND
				substr(m.event_id::text, 20, 1) IN ('8', '9', 'a', 'b')) AS version_4
  FROM outbox_messages m JOIN pooled USING (id);

-- an index of the log that is not a plain btree on its columns (an
-- operator's own, on an expression) gets the rows enqueued too
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('CREATE INDEX outbox_log_%s_lower_topic ON outbox_log_%s (lower(topic))', t, t);
	END LOOP;
END
$$;
SELECT outbox_enqueue('Indexed.Topic', '1'::jsonb) AS indexed \gset
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT id = :indexed AS found_by_its_index FROM outbox_log WHERE lower(topic) = 'indexed.topic';
SELECT id = :indexed AS found_by_id FROM outbox_log WHERE id = :indexed;
RESET enable_seqscan;
RESET enable_bitmapscan;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('DROP INDEX outbox_log_%s_lower_topic', t);
	END LOOP;
END
$$;

-- and an exclusion constraint of an operator's is enforced: 23P01
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('ALTER TABLE outbox_log_%s ADD CONSTRAINT outbox_log_%s_one_per_topic EXCLUDE USING btree (topic WITH =)', t, t);
	END LOOP;
END
$$;
SELECT outbox_enqueue('excluded', '1'::jsonb) > 0 AS first_ok;
SELECT outbox_enqueue('excluded', '2'::jsonb);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stored FROM outbox_log WHERE topic = 'excluded';
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('ALTER TABLE outbox_log_%s DROP CONSTRAINT outbox_log_%s_one_per_topic', t, t);
	END LOOP;
END
$$;

-- an operator's CHECK constraint on the log is enforced too, for
-- outbox_enqueue and the capture trigger alike: 23514, nothing stored,
-- the event_id not taken
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('ALTER TABLE outbox_log_%s ADD CONSTRAINT outbox_log_%s_shop CHECK (topic LIKE ''shop.%%'')', t, t);
	END LOOP;
END
$$;
SELECT outbox_enqueue('shop.orders', '1'::jsonb) > 0 AS checked_ok;
\set VERBOSITY terse
SELECT outbox_enqueue('elsewhere', '1'::jsonb, event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a21');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE checked_rows (id int PRIMARY KEY);
SELECT outbox_attach('checked_rows', 'elsewhere');
INSERT INTO checked_rows VALUES (1);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT outbox_detach('checked_rows');
DROP TABLE checked_rows;
SELECT topic FROM outbox_log ORDER BY id;
SELECT count(*) AS event_ids_taken FROM outbox_event_ids;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('ALTER TABLE outbox_log_%s DROP CONSTRAINT outbox_log_%s_shop', t, t);
	END LOOP;
END
$$;
-- and a NOT NULL an operator adds: 23502
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
ALTER TABLE outbox_log_0 ALTER COLUMN headers SET NOT NULL;
ALTER TABLE outbox_log_1 ALTER COLUMN headers SET NOT NULL;
ALTER TABLE outbox_log_2 ALTER COLUMN headers SET NOT NULL;
ALTER TABLE outbox_log_3 ALTER COLUMN headers SET NOT NULL;
\set VERBOSITY terse
SELECT outbox_enqueue('shop.orders', '2'::jsonb);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT outbox_enqueue('shop.orders', '3'::jsonb, headers => '{"h": "v"}') > 0 AS with_headers_ok;
ALTER TABLE outbox_log_0 ALTER COLUMN headers DROP NOT NULL;
ALTER TABLE outbox_log_1 ALTER COLUMN headers DROP NOT NULL;
ALTER TABLE outbox_log_2 ALTER COLUMN headers DROP NOT NULL;
ALTER TABLE outbox_log_3 ALTER COLUMN headers DROP NOT NULL;

-- an operator's row triggers on the log fire, but not the extension's own
-- outbox_restored, which is for rows written by hand (a restore).  A
-- BEFORE trigger may pass the event, refuse it (an error) or skip it
-- (NULL: nothing stored, outbox_enqueue returns NULL, the event_id is not
-- taken); one that changes it is refused, 27000, for the event was
-- checked and encoded as it was given
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
CREATE FUNCTION outbox_test_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.topic = 'skipped' THEN
		RETURN NULL;
	ELSIF NEW.topic = 'refused' THEN
		RAISE EXCEPTION 'no events of topic refused' USING ERRCODE = 'P0001';
	ELSIF NEW.topic = 'changed' THEN
		NEW.payload := '\x00';
	END IF;
	RAISE NOTICE 'before insert: % %', NEW.topic, NEW.key;
	RETURN NEW;
END
$$;
CREATE FUNCTION outbox_test_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'after insert: % %', NEW.topic, NEW.key;
	RETURN NULL;
END
$$;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('CREATE TRIGGER outbox_test_before BEFORE INSERT ON outbox_log_%s FOR EACH ROW EXECUTE FUNCTION outbox_test_before()', t);
		EXECUTE format('CREATE TRIGGER outbox_test_after AFTER INSERT ON outbox_log_%s FOR EACH ROW EXECUTE FUNCTION outbox_test_after()', t);
	END LOOP;
END
$$;
BEGIN;
SET LOCAL track_functions = 'all';
SELECT outbox_enqueue('passed', '1'::jsonb, key => 'k') > 0 AS passed;
SELECT outbox_enqueue('skipped', '1'::jsonb, key => 'k',
					  event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a22') AS skipped;
SELECT funcname, calls FROM pg_stat_xact_user_functions
 WHERE funcname IN ('outbox_test_before', 'outbox_test_after', 'outbox_restored')
 ORDER BY funcname;
COMMIT;
SELECT outbox_enqueue('refused', '1'::jsonb, key => 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_enqueue('changed', '1'::jsonb, key => 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT topic FROM outbox_log ORDER BY id;
SELECT count(*) AS event_ids_taken FROM outbox_event_ids;
-- the skipped event_id is free for the event that comes
SELECT outbox_enqueue('passed', '2'::jsonb, key => 'k',
					  event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a22') > 0 AS its_id_free;
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE format('DROP TRIGGER outbox_test_before ON outbox_log_%s', t);
		EXECUTE format('DROP TRIGGER outbox_test_after ON outbox_log_%s', t);
	END LOOP;
END
$$;
DROP FUNCTION outbox_test_before(), outbox_test_after();
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids;
