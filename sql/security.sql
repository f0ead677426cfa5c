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
CREATE FUNCTION public.mallory_payload(via text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.mallory_log VALUES (current_user, via);
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

DROP TABLE "x""; DROP TABLE mallory_rows; --";
DROP OWNED BY mallory CASCADE;
DROP ROLE mallory;
TRUNCATE outbox_log, outbox_retries, outbox_ledger, outbox_event_ids, outbox_publish_stats;
