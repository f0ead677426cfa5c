/* outbox--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION outbox" to load this file. \quit

--
-- The states of an event.  pending -> published on delivery; on a refused
-- delivery failed (retried after next_attempt_at) and, after the last
-- attempt or an error retrying cannot fix, abandoned.  'processing' is not
-- used by this version: claims are row locks held while the batch is in
-- flight, so a dead worker's claims vanish with it.
--
CREATE TYPE @extschema@.outbox_status AS ENUM (
	'pending', 'processing', 'published', 'failed', 'abandoned'
);

CREATE TABLE @extschema@.outbox_messages (
	id				bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id		uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid() UNIQUE,
	topic			text NOT NULL,
	key				text,
	payload			bytea,
	headers			jsonb,
	status			@extschema@.outbox_status NOT NULL DEFAULT 'pending',
	attempts		integer NOT NULL DEFAULT 0,
	next_attempt_at	timestamptz,
	last_error		text,
	created_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	published_at	timestamptz,
	kafka_partition	integer,
	kafka_offset	bigint,
	CONSTRAINT outbox_messages_tombstone_key CHECK (payload IS NOT NULL OR key IS NOT NULL)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);

COMMENT ON TABLE @extschema@.outbox_messages IS
	'Events waiting to be published to Kafka, and their outcome';

-- Due events in publish order.  Only unfinished rows are indexed, so the
-- index stays small however many published rows are kept.
CREATE INDEX outbox_messages_due ON @extschema@.outbox_messages (id)
	WHERE status IN ('pending', 'failed');

-- Failed events waiting for their retry hold back later events of the
-- same key; this index finds them.  It holds only failed rows.
CREATE INDEX outbox_messages_failed_key ON @extschema@.outbox_messages (topic, key, id)
	WHERE status IN ('failed', 'processing') AND key IS NOT NULL;

--
-- outbox_enqueue: store an event in the caller's transaction.  One C
-- function serves the three payload types.
--
CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload jsonb,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload text,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION @extschema@.outbox_enqueue(topic text, payload bytea,
	key text DEFAULT NULL, headers jsonb DEFAULT NULL, event_id uuid DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'outbox_enqueue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) FROM PUBLIC;

--
-- The worker's state machine, in SQL so that it can be tested without a
-- worker.  The worker calls these inside one transaction per batch.
--

-- Claim up to batch_size due events in id order and lock them until the
-- end of the transaction.  An event is held back while an earlier event of
-- the same topic and key waits for its retry.  One claim runs at a time
-- (an advisory lock): a second claimer gets nothing until the first ends,
-- so no later event of a key is ever claimed beside an earlier one that is
-- in flight elsewhere.
CREATE FUNCTION @extschema@.outbox_claim(batch_size integer)
RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
			   payload bytea, headers jsonb)
LANGUAGE sql VOLATILE
AS $$
	SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers
	  FROM @extschema@.outbox_messages m
	 WHERE m.status IN ('pending', 'failed')
	   AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= pg_catalog.now())
	   AND (m.key IS NULL OR NOT EXISTS (
			SELECT 1
			  FROM @extschema@.outbox_messages e
			 WHERE e.topic = m.topic AND e.key = m.key AND e.id < m.id
			   AND e.status IN ('failed', 'processing') AND e.key IS NOT NULL
			   AND (e.status = 'processing' OR e.next_attempt_at > pg_catalog.now())))
	   AND (SELECT pg_catalog.pg_try_advisory_xact_lock(
					pg_catalog.hashtext('outbox_claim'),
					'@extschema@.outbox_messages'::pg_catalog.regclass::pg_catalog.oid::integer))
	 ORDER BY m.id
	 LIMIT batch_size
	   FOR UPDATE OF m SKIP LOCKED
$$;

-- The delay before attempt number attempts + 1: base * 2^(attempts - 1),
-- capped at max_delay, spread by +/- jitter.
CREATE FUNCTION @extschema@.outbox_retry_delay(attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS interval
LANGUAGE sql VOLATILE
AS $$
	SELECT pg_catalog.make_interval(secs =>
		LEAST(pg_catalog.date_part('epoch', base_delay)
							* pg_catalog.power(2::double precision,
											   LEAST(GREATEST(attempts - 1, 0), 60)),
						 pg_catalog.date_part('epoch', max_delay))
		* (1 + jitter * (2 * pg_catalog.random() - 1)))
$$;

-- Record deliveries.
CREATE FUNCTION @extschema@.outbox_mark_published(ids bigint[], partitions integer[],
	offsets bigint[])
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
	WITH done AS (
		UPDATE @extschema@.outbox_messages m
		   SET status = 'published',
			   attempts = m.attempts + 1,
			   published_at = pg_catalog.clock_timestamp(),
			   next_attempt_at = NULL,
			   kafka_partition = u.kafka_partition,
			   kafka_offset = u.kafka_offset
		  FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(partitions), pg_catalog.unnest(offsets))
			   AS u(id, kafka_partition, kafka_offset)
		 WHERE m.id = u.id
		RETURNING 1
	)
	SELECT pg_catalog.count(*) FROM done
$$;

-- Record refused deliveries: failed with a backoff, or abandoned after the
-- last attempt or an error that retrying cannot fix.
CREATE FUNCTION @extschema@.outbox_mark_failed(ids bigint[], errors text[],
	permanent boolean[], max_attempts integer, base_delay interval,
	max_delay interval, jitter double precision)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
	WITH done AS (
		UPDATE @extschema@.outbox_messages m
		   SET attempts = m.attempts + 1,
			   last_error = u.error,
			   status = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
							 THEN 'abandoned' ELSE 'failed'
						END::@extschema@.outbox_status,
			   next_attempt_at = CASE WHEN u.permanent OR m.attempts + 1 >= max_attempts
									  THEN NULL
									  ELSE pg_catalog.clock_timestamp()
										   + @extschema@.outbox_retry_delay(m.attempts + 1, base_delay,
																			max_delay, jitter)
								 END
		  FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(errors), pg_catalog.unnest(permanent))
			   AS u(id, error, permanent)
		 WHERE m.id = u.id
		RETURNING 1
	)
	SELECT pg_catalog.count(*) FROM done
$$;

REVOKE ALL ON FUNCTION @extschema@.outbox_claim(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision) FROM PUBLIC;
