/* outbox--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.1'" to load this file. \quit

--
-- 1.1 closes the ways in which code of another role could run with the
-- rights of the extension's owner or of the worker:
--
-- * Every function pins search_path, so that an operator, function or type
--   that a role plants in a schema on the caller's search_path (public,
--   say) is never resolved in its body.  The worker calls these functions
--   too.
-- * outbox_capture no longer runs as its owner: the envelope (row_to_json,
--   output functions, casts to json of the table's types) is built with
--   the rights of the role that changed the row; the event is stored as
--   outbox_enqueue stores it (src/trigger.c).
--
-- outbox_worker_status() returns a row per database, as 1.1 has a worker
-- per database.
--
-- It also changes the claim: an event is held back while any earlier event
-- of its key is unfinished and not in the same batch (failed and waiting,
-- or locked by another session), and a batch is bounded by bytes too.
--

ALTER FUNCTION @extschema@.outbox_capture() SECURITY INVOKER;

-- outbox_enqueue inserts straight into the table (src/enqueue.c): it checks
-- no permission on the table, looks up no name through search_path and
-- evaluates nothing but built-in functions, so it needs neither its owner's
-- rights nor a pinned search_path, whose save and restore at every call
-- cost as much as the insert.  EXECUTE on it remains the right to enqueue.
ALTER FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;
ALTER FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid)
	SECURITY INVOKER RESET search_path;

-- Claim up to batch_size due events, and at most about max_bytes of them,
-- in id order, and lock them until the end of the transaction.  An event of
-- a key is claimed only if every earlier unfinished event of that key is
-- claimed with it: one that waits for its retry, or that another session
-- holds locked (SKIP LOCKED passes over it), holds the later ones back.
-- One claim runs at a time (an advisory lock): a second claimer gets
-- nothing until the first ends, so no later event of a key is ever claimed
-- beside an earlier one that is in flight elsewhere.  PL/pgSQL keeps the
-- plan for the session: a SQL function would be parsed and planned again
-- at each call, which an idle worker does every outbox.poll_interval.
DROP FUNCTION @extschema@.outbox_claim(integer);
CREATE FUNCTION @extschema@.outbox_claim(batch_size integer,
	max_bytes bigint DEFAULT 16777216)
RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
			   payload bytea, headers jsonb)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		WITH claimed AS MATERIALIZED (
			SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers,
				   coalesce(octet_length(m.payload), 0) + coalesce(octet_length(m.key), 0)
				   + coalesce(pg_column_size(m.headers), 0) AS bytes
			  FROM @extschema@.outbox_messages m
			 WHERE m.status IN ('pending', 'failed')
			   AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())
			   AND (SELECT pg_try_advisory_xact_lock(hashtext('outbox_claim'),
							'@extschema@.outbox_messages'::regclass::oid::integer))
			 ORDER BY m.id
			 LIMIT batch_size
			   FOR UPDATE OF m SKIP LOCKED
		), held_back AS (
			-- earlier unfinished events that this claim did not take
			SELECT h.topic, h.key, min(h.id) AS first_id
			  FROM @extschema@.outbox_messages h
			 WHERE h.status IN ('pending', 'failed')
			   AND h.key IS NOT NULL
			   AND h.id < (SELECT max(c.id) FROM claimed c)
			   AND NOT EXISTS (SELECT FROM claimed c WHERE c.id = h.id)
			 GROUP BY h.topic, h.key
		), ready AS (
			SELECT c.*, sum(c.bytes) OVER (ORDER BY c.id) - c.bytes AS bytes_before
			  FROM claimed c
			 WHERE NOT EXISTS (SELECT FROM held_back h
								WHERE h.topic = c.topic AND h.key = c.key AND h.first_id < c.id)
		)
		SELECT r.id, r.event_id, r.topic, r.key, r.payload, r.headers
		  FROM ready r
		 WHERE r.bytes_before < max_bytes
		 ORDER BY r.id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.outbox_claim(integer, bigint) FROM PUBLIC;

-- The claim no longer looks up failed events by key.
DROP INDEX @extschema@.outbox_messages_failed_key;

ALTER FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_latency_histogram(double precision[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_dead_letter(bigint[], text)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision, text)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_retry(bigint)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_retry_abandoned(text)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_abandon(bigint)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_attach(regclass, text, text[])
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.outbox_detach(regclass)
	SET search_path = pg_catalog, pg_temp;
-- The workers, one row per database served or waiting for a worker, from
-- shared memory: never waits for the table, answers from any database.
DROP FUNCTION @extschema@.outbox_worker_status();
CREATE FUNCTION @extschema@.outbox_worker_status(
	OUT database name, OUT pid integer, OUT state text,
	OUT state_since timestamptz, OUT started_at timestamptz,
	OUT brokers_up integer, OUT published bigint, OUT failed bigint,
	OUT last_batch_at timestamptz, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_worker_status'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_worker_status() FROM PUBLIC;
