--
-- Hostile neighbours.  A role with CREATE on public plants an operator and
-- functions that would be picked over pg_catalog's, and a cast to json of
-- a type of its own.  No code of the extension that runs with more rights
-- than its caller (outbox_enqueue, the capture insert, the state machine
-- the worker runs as the extension's owner) may reach them.  The planted
-- code tries to make its author superuser and logs who ran it.
--
CREATE EXTENSION IF NOT EXISTS outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;
ALTER SEQUENCE outbox_event_id_seq RESTART WITH 1;
UPDATE outbox_reader SET last_id = 0, running = '{}', draining = '{}';
CREATE ROLE mallory LOGIN;
GRANT CREATE, USAGE ON SCHEMA public TO mallory;
GRANT EXECUTE ON FUNCTION outbox_enqueue(text, jsonb, text, jsonb, uuid) TO mallory;

SET ROLE mallory;
CREATE TABLE public.mallory_log (ran_as name, via text);
GRANT INSERT ON public.mallory_log TO PUBLIC;
-- what ran as another role, counted where no rollback takes it back
CREATE SEQUENCE public.mallory_ran;
GRANT USAGE ON SEQUENCE public.mallory_ran TO PUBLIC;
CREATE FUNCTION public.mallory_payload(via text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.mallory_log VALUES (current_user, via);
	IF current_user <> 'mallory' THEN
		PERFORM pg_catalog.nextval('public.mallory_ran');
	END IF;
	BEGIN
		ALTER ROLE mallory SUPERUSER;
	EXCEPTION WHEN insufficient_privilege THEN NULL;
	END;
END
$$;

-- an operator on the extension's enum: an exact match beats pg_catalog's
-- anyenum = anyenum wherever public is searched
CREATE FUNCTION public.status_eq(a outbox_status, b outbox_status) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.mallory_payload('operator');
	RETURN a::text OPERATOR(pg_catalog.=) b::text;
END
$$;
CREATE OPERATOR public.= (LEFTARG = outbox_status, RIGHTARG = outbox_status,
						  FUNCTION = public.status_eq);

-- functions with closer signatures than pg_catalog's, for unqualified calls
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.mallory_payload('function unnest');
	RETURN QUERY SELECT pg_catalog.unnest($1);
END
$$;
CREATE FUNCTION public.date_bin(interval, timestamptz, text) RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.mallory_payload('function date_bin');
	RETURN pg_catalog.date_bin($1, $2, 'epoch');
END
$$;

-- a type of her own whose cast to json runs her code
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE FUNCTION public.mood_json(m public.mood) RETURNS json
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.mallory_payload('cast');
	RETURN pg_catalog.to_json(m::text);
END
$$;
CREATE CAST (public.mood AS json) WITH FUNCTION public.mood_json(public.mood);
CREATE TABLE public.mallory_rows (id int PRIMARY KEY, feeling public.mood);

-- Overloads of the extension's function names: closer ones, which an
-- unqualified or uncast call would pick over the extension's (the
-- integer that cardinality() returns, a numeric constant), and ambiguous
-- ones with defaults, which make such a call fail as "not unique".  Every
-- name the extension's SQL has called inside its functions, and every
-- helper it has now: none may run, none may stop anything.
CREATE FUNCTION public.outbox_count_recorded(n integer) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_count_recorded(integer)'); END $$;
CREATE FUNCTION public.outbox_lock_reader(wait boolean, x integer DEFAULT 0) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_lock_reader'); RETURN true; END $$;
CREATE FUNCTION public.outbox_log_rows(ids integer[]) RETURNS SETOF outbox_log
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_log_rows(integer[])'); END $$;
CREATE FUNCTION public.outbox_log_rows(ids bigint[], x integer DEFAULT 0) RETURNS SETOF outbox_log
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_log_rows'); END $$;
CREATE FUNCTION public.outbox_copy_to_retries(ids integer[]) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_copy_to_retries(integer[])'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_copy_to_retries(ids bigint[], x integer DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_copy_to_retries'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_mark_logged(ids bigint[], partitions integer[], offsets bigint[],
	topics text[], created_at timestamptz[], keep boolean, x integer DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_mark_logged'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_count_published(topics text[], created_at timestamptz[],
	x integer DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_count_published'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_unread_events(r outbox_reader, x integer DEFAULT 0)
RETURNS TABLE (id bigint, topic text, created_at timestamptz)
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_unread_events'); END $$;
CREATE FUNCTION public.outbox_unread(id bigint, txid xid8, r outbox_reader, x integer DEFAULT 0)
RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_unread'); RETURN true; END $$;
CREATE FUNCTION public.outbox_unread_topics(x integer DEFAULT 0)
RETURNS TABLE (topic text, unread bigint, oldest_created_at timestamptz)
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_unread_topics'); END $$;
CREATE FUNCTION public.outbox_in_progress(x integer DEFAULT 0) RETURNS xid8[]
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_in_progress'); RETURN '{}'; END $$;
CREATE FUNCTION public.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision, x integer DEFAULT 0) RETURNS interval
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_retry_delay'); RETURN '0'; END $$;
CREATE FUNCTION public.outbox_dead_letter(ids bigint[], dead_letter_topic text,
	x integer DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_dead_letter'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_latency_histogram(latencies_ms double precision[],
	x integer DEFAULT 0) RETURNS bigint[]
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_latency_histogram'); RETURN '{}'; END $$;
CREATE FUNCTION public.outbox_histogram_add(a bigint[], b bigint[], x integer DEFAULT 0)
RETURNS bigint[]
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_histogram_add'); RETURN a; END $$;
CREATE FUNCTION public.outbox_histogram_quantile(histogram bigint[], q numeric)
RETURNS double precision
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_histogram_quantile(numeric)'); RETURN 0; END $$;
CREATE FUNCTION public.outbox_histogram_quantile(histogram bigint[], q double precision,
	x integer DEFAULT 0) RETURNS double precision
LANGUAGE plpgsql AS $$ BEGIN PERFORM public.mallory_payload('outbox_histogram_quantile'); RETURN 0; END $$;
RESET ROLE;

-- enqueue, by her and by a superuser
SET ROLE mallory;
SELECT outbox_enqueue('sec', '{"by": "mallory"}'::jsonb, key => 'k') > 0 AS enqueued;
RESET ROLE;
SELECT outbox_enqueue('sec', 'by the superuser'::text, key => 'k') > 0 AS enqueued;

-- capture: a superuser attaches the trigger to her table, she inserts
SELECT outbox_attach('mallory_rows', 'sec.rows');
SET ROLE mallory;
INSERT INTO public.mallory_rows VALUES (1, 'happy');
RESET ROLE;
SELECT key, convert_from(payload, 'UTF8')::jsonb -> 'after' AS after
  FROM outbox_messages WHERE topic = 'sec.rows';

-- the worker's state machine, as the worker calls it (as the owner, here a
-- superuser), with public on the search path
SET search_path = "$user", public;
BEGIN;
SELECT id FROM outbox_claim(10);
SELECT outbox_mark_published('{1}', '{0}', '{0}', true);
SELECT outbox_mark_failed('{2}', '{"Broker: Not enough in-sync replicas"}', '{f}',
						  10, '1s', '1min', 0, 'sec.dead');
SELECT outbox_mark_failed('{3}', '{"Broker: Message size too large"}', '{t}',
						  10, '1s', '1min', 0, 'sec.dead');
COMMIT;
-- retry, abandon, the dead-letter path, retention
SELECT outbox_retry(2);
SELECT outbox_abandon(2);
SELECT outbox_retry_abandoned('sec');
SELECT topic, key, headers ->> 'original_topic' AS original_topic
  FROM outbox_messages WHERE topic = 'sec.dead';
SELECT outbox_purge_batch('0s', '0s', 100) >= 0 AS purged;
SELECT outbox_purge() >= 0 AS purged;
SELECT count(*) > 0 AS has_stats FROM outbox_stats;
-- an unread event of the log abandoned; the rest claimed, released
SELECT outbox_enqueue('sec.more', 'unread'::text, key => 'm') AS unread_id \gset
SELECT outbox_enqueue('sec.more', 'released'::text, key => 'n') > 0 AS enqueued;
SELECT outbox_abandon(:unread_id);
BEGIN;
SELECT outbox_mark_released(array_agg(id)) > 0 AS released FROM outbox_claim(10);
COMMIT;
SELECT outbox_rotate('0') >= 0 AS rotated;
SELECT convert_from(payload, 'UTF8') AS payload, status FROM outbox_messages
 WHERE topic = 'sec.more' ORDER BY id;
-- DROP EXTENSION counts what is not delivered before it drops: with the
-- caller's search path too, nothing planted runs
BEGIN;
DROP EXTENSION outbox;
ROLLBACK;
RESET search_path;

-- a table name made to break out of formatted SQL is quoted
CREATE TABLE "x""; DROP TABLE mallory_rows; --" (id int PRIMARY KEY);
SELECT outbox_attach('"x""; DROP TABLE mallory_rows; --"', 'sec.quoted', '{"id"}');
INSERT INTO "x""; DROP TABLE mallory_rows; --" VALUES (7);
SELECT outbox_detach('"x""; DROP TABLE mallory_rows; --"');
SELECT key FROM outbox_messages WHERE topic = 'sec.quoted';
SELECT to_regclass('mallory_rows') IS NOT NULL AS still_there;

-- she is no superuser, and her code ran only as herself (her own cast, in
-- the capture trigger she fired)
SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory';
SELECT ran_as, via, count(*) FROM public.mallory_log GROUP BY 1, 2 ORDER BY 1, 2;
SELECT is_called AS ran_as_another_role FROM public.mallory_ran;

DROP TABLE "x""; DROP TABLE mallory_rows; --";
DROP OWNED BY mallory CASCADE;
DROP ROLE mallory;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;

--
-- The extension's schema is owned by the extension's owner or by a
-- superuser: whoever owns it could rename it and put look-alikes in its
-- place, which the extension's code would run with its rights.
--
CREATE ROLE outbox_schema_owner LOGIN;
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE SCHEMA untrusted AUTHORIZATION outbox_schema_owner;
CREATE EXTENSION outbox SCHEMA untrusted;
DROP SCHEMA untrusted;
CREATE EXTENSION outbox;
-- given away later: what names the schema refuses (55000), enqueue (which
-- finds its table by oid) goes on
ALTER SCHEMA public OWNER TO outbox_schema_owner;
SELECT outbox_enqueue('sec.owner', 'one'::text) > 0 AS enqueued;
SELECT * FROM outbox_claim(10);
SELECT outbox_retry(1);
SELECT outbox_abandon(1);
SELECT outbox_purge();
SELECT outbox_discard();
ALTER SCHEMA public OWNER TO pg_database_owner;
-- public is pg_database_owner's, so the database's owner is its owner
SELECT datdba::regrole AS dbowner FROM pg_database WHERE datname = current_database() \gset
ALTER DATABASE :"DBNAME" OWNER TO outbox_schema_owner;
SELECT outbox_enqueue('sec.owner', 'two'::text) > 0 AS enqueued;
SELECT * FROM outbox_claim(10);
SELECT outbox_rotate('0');
ALTER DATABASE :"DBNAME" OWNER TO :"dbowner";
-- trusted again: both events are there
BEGIN;
SELECT outbox_mark_published(array_agg(id), array_agg(0), array_agg(id), true) AS published,
	   string_agg(convert_from(payload, 'UTF8'), ' ' ORDER BY id) AS events
  FROM outbox_claim(10);
COMMIT;

--
-- What locks the outbox must see what committed before it got the lock,
-- whatever the caller's isolation level: under REPEATABLE READ and
-- SERIALIZABLE it refuses to run (25000).
--
CREATE FUNCTION pg_temp.outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE statement;
	RETURN 'ran';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;
CREATE TEMP TABLE locking (f text, statement text);
INSERT INTO locking VALUES
	('outbox_claim', 'SELECT count(*) FROM outbox_claim(10)'),
	('outbox_mark_published', $$SELECT outbox_mark_published('{1}', '{0}', '{0}', true)$$),
	('outbox_mark_failed', $$SELECT outbox_mark_failed('{1}', '{e}', '{f}', 10, '1s', '1min', 0, '')$$),
	('outbox_mark_released', $$SELECT outbox_mark_released('{1}')$$),
	('outbox_abandon', 'SELECT outbox_abandon(1)'),
	('outbox_discard', 'SELECT outbox_discard()'),
	('outbox_rotate', $$SELECT outbox_rotate('0')$$),
	('outbox_purge', 'SELECT outbox_purge()');
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT f, pg_temp.outcome(statement) AS read_committed FROM locking;
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT f, pg_temp.outcome(statement) AS repeatable_read FROM locking;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT f, pg_temp.outcome(statement) AS serializable FROM locking;
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outbox_rotate('0');
ROLLBACK;
-- nor on a replica's session role, where triggers do not fire: a claim
-- whose events are not recorded does not commit
SELECT outbox_enqueue('sec.replica', 'claimed'::text) > 0 AS enqueued;
SET session_replication_role = replica;
BEGIN;
SELECT count(*) FROM outbox_claim(10);
COMMIT;
RESET session_replication_role;
SELECT status FROM outbox_messages WHERE topic = 'sec.replica';
-- an event published since a REPEATABLE READ snapshot looks pending in
-- it: outbox_abandon there would abandon what Kafka has
SELECT outbox_enqueue('sec.rr', 'published'::text) AS rr_id \gset
BEGIN;
SELECT outbox_mark_published(array_agg(id), array_agg(0), array_agg(id), true) AS published
  FROM outbox_claim(10);
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outbox_abandon(:rr_id);
ROLLBACK;
SELECT status FROM outbox_messages WHERE id = :rr_id;

--
-- A role with no right on the extension's tables takes no lock on them
-- that it could keep (the rotation's TRUNCATE waits for any): a statement
-- naming one is refused (42501) before it can hold it, however it comes.
--
CREATE ROLE outbox_stranger LOGIN;
GRANT CREATE, USAGE ON SCHEMA public TO outbox_stranger;
SET ROLE outbox_stranger;
CREATE TABLE stranger_rows (id int);
\set ON_ERROR_ROLLBACK on
\set VERBOSITY terse
BEGIN;
PREPARE stranger_p AS SELECT FROM outbox_log_0;
EXPLAIN (COSTS OFF) SELECT FROM outbox_log_1;
DECLARE stranger_c CURSOR FOR SELECT FROM outbox_log_2;
CREATE VIEW stranger_view AS SELECT FROM outbox_log_3;
CREATE TABLE stranger_copy AS SELECT FROM outbox_log_0;
COPY (SELECT FROM outbox_log_1) TO STDOUT;
CREATE FUNCTION stranger_f() RETURNS bigint LANGUAGE sql
	BEGIN ATOMIC SELECT count(*) FROM outbox_log_2; END;
CREATE FUNCTION stranger_g() RETURNS bigint LANGUAGE sql
	RETURN (SELECT count(*) FROM outbox_log_3);
CREATE RULE stranger_rule AS ON INSERT TO stranger_rows DO ALSO SELECT FROM outbox_log_0;
CREATE POLICY stranger_policy ON stranger_rows USING (EXISTS (SELECT FROM outbox_log_1));
SELECT relation::regclass AS locked FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'relation'
   AND relation::regclass::text LIKE 'outbox%'
 ORDER BY 1;
ROLLBACK;
\set ON_ERROR_ROLLBACK off
\set VERBOSITY default
RESET ROLE;

--
-- Keys of any length: a refused event is copied to the retry table, whose
-- key index holds a hash of the key, and the rest of its batch recorded.
--
SELECT string_agg(md5(i::text), '') AS long_key FROM generate_series(1, 188) i \gset
SELECT outbox_enqueue('sec.key', 'long'::text, key => :'long_key') AS long_id \gset
SELECT outbox_enqueue('sec.key', 'short'::text, key => 'k') AS short_id \gset
BEGIN;
SELECT count(*) AS claimed FROM outbox_claim(10);
SELECT outbox_mark_failed(ARRAY[:long_id]::bigint[], '{"Broker: Topic authorization failed"}',
						  '{f}', 10, '1min', '1min', 0, '');
SELECT outbox_mark_published(ARRAY[:short_id]::bigint[], '{0}', '{0}', true);
COMMIT;
-- the next event of the long key waits behind it
SELECT outbox_enqueue('sec.key', 'after'::text, key => :'long_key') > 0 AS enqueued;
BEGIN;
SELECT count(*) AS claimed FROM outbox_claim(10);
COMMIT;
SELECT convert_from(payload, 'UTF8') AS payload, octet_length(key) AS key_bytes, status,
	   attempts, last_error
  FROM outbox_messages WHERE topic = 'sec.key' ORDER BY id;

DROP OWNED BY outbox_schema_owner, outbox_stranger;
DROP ROLE outbox_schema_owner;
DROP ROLE outbox_stranger;

--
-- DROP OWNED BY the superuser who owns the extension's schema drops the
-- extension by cascade only, and what is not delivered is counted in the
-- object access hook, in the caller's session: with public before
-- pg_catalog on the caller's path, and an aggregate count(*) of a role's
-- own in public, nothing planted runs there either.
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
CREATE ROLE outbox_schema_su SUPERUSER;
CREATE SCHEMA sec_cascade AUTHORIZATION outbox_schema_su;
CREATE EXTENSION outbox SCHEMA sec_cascade;
-- an event of the retry table, pending
SELECT sec_cascade.outbox_enqueue('sec.cascade', 'x'::text) AS cascade_id \gset
SELECT sec_cascade.outbox_abandon(:cascade_id) + sec_cascade.outbox_retry(:cascade_id) AS pending_again;
BEGIN;
SELECT sec_cascade.outbox_mark_released(array_agg(id)) FROM sec_cascade.outbox_claim(10);
COMMIT;
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory;
CREATE SEQUENCE public.mallory_ran;
GRANT USAGE ON SEQUENCE public.mallory_ran TO PUBLIC;
CREATE FUNCTION public.mallory_count(n bigint) RETURNS bigint LANGUAGE sql AS $$
	SELECT n + 1 + CASE WHEN current_user <> 'mallory'
						THEN 0 * pg_catalog.nextval('public.mallory_ran') ELSE 0 END
$$;
CREATE AGGREGATE public.count(*) (SFUNC = public.mallory_count, STYPE = bigint, INITCOND = '0');
RESET ROLE;
SET search_path = public, pg_catalog;
BEGIN;
DROP OWNED BY outbox_schema_su CASCADE;
ROLLBACK;
RESET search_path;
SELECT is_called AS ran_as_another_role FROM public.mallory_ran;
DROP OWNED BY mallory CASCADE;
DROP ROLE mallory;
SELECT sec_cascade.outbox_discard() AS discarded;
DROP EXTENSION outbox;
DROP SCHEMA sec_cascade;
DROP ROLE outbox_schema_su;
CREATE EXTENSION outbox;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;
