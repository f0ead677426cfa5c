/* outbox--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.3'" to load this file. \quit

--
-- A fresh install of 1.3 is outbox--1.2.sql followed by this script, as
-- pg_stat_statements builds its newest version: t/017_versions.pl proves
-- that it gives the schema of the chain from 1.0.
--

--
-- The outbox event router: Debezium's defaults with the JSON converter
-- (the payload as a JSON string, keys as JSON), and its converters'
-- settings as options (src/capture/router.c).  The triggers that 1.2 made keep
-- their stored options.
--
DROP FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean);
CREATE FUNCTION @extschema@.outbox_attach_router(tbl regclass,
	topic_pattern text DEFAULT 'outbox.event.${routedByValue}',
	route_by text DEFAULT 'aggregatetype', key_column text DEFAULT 'aggregateid',
	id_column text DEFAULT 'id', payload_column text DEFAULT 'payload',
	timestamp_column text DEFAULT NULL, header_columns text[] DEFAULT NULL,
	expand_payload boolean DEFAULT false, key_converter text DEFAULT 'json',
	schemas_enable boolean DEFAULT false,
	tombstone_on_empty_payload boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean) FROM PUBLIC;

--
-- Change events with the defaults of Debezium's PostgreSQL connector, and
-- its settings as options of outbox_attach: decimal_handling
-- (decimal.handling.mode), tombstones (tombstones.on.delete),
-- skipped_operations (skipped.operations), schemas_enable (the JSON
-- converter's schemas.enable), converter (json, or avro: Confluent's
-- AvroConverter with the Schema Registry, src/capture/debezium_avro.c);
-- NULL gives the connector's default
-- (src/capture/capture.c, src/capture/debezium.c).  The triggers attached before keep
-- their arguments, and what they wrote.
--
DROP FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean);
CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL, format text DEFAULT 'outbox',
	snapshot boolean DEFAULT false, tombstones boolean DEFAULT NULL,
	decimal_handling text DEFAULT NULL, skipped_operations text DEFAULT NULL,
	schemas_enable boolean DEFAULT NULL, converter text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text) FROM PUBLIC;

--
-- Topics: per-topic settings, and the Kafka clusters the worker publishes to
--
-- A row per pattern: a topic name, or the start of one followed by '*'. A
-- topic takes the row of the longest pattern that matches it, whole; a
-- column left NULL is the outbox.* setting. format is how a record is
-- written: NULL, as given to outbox_enqueue(); 'avro', a jsonb payload
-- checked against value_schema and encoded at enqueue, in the Schema
-- Registry's wire format (the ids are the registry's); 'cloudevents', the
-- payload as given, with the ce_* headers of CloudEvents' binary mode.
--

CREATE TABLE @extschema@.outbox_topic_settings (
	pattern text PRIMARY KEY,
	brokers text,
	properties_file text,
	format text,
	value_schema jsonb,
	key_schema jsonb,
	value_schema_id integer,
	key_schema_id integer,
	cloudevents_source text,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.outbox_topic_settings IS
	'The settings of topics by pattern (a topic, or a prefix and *): the longest match wins; NULL is the outbox.* setting. Written by outbox_set_topic().';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outbox_topic_settings', '');
-- Owned by the bootstrap superuser, read by the extension's owner: the
-- brokers a row names are where the credentials of its properties file, or
-- of outbox.kafka_properties_file, go, which only superusers may choose;
-- the extension's owner need not stay a superuser. The grant comes after
-- the change of owner, which would take it along.
DO $$
BEGIN
	EXECUTE pg_catalog.format('ALTER TABLE @extschema@.outbox_topic_settings OWNER TO %I',
							  pg_catalog.pg_get_userbyid(10));
	EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.outbox_topic_settings TO %I',
							  CURRENT_USER);
END
$$;

CREATE FUNCTION @extschema@.outbox_set_topic(pattern text, brokers text DEFAULT NULL,
											 properties_file text DEFAULT NULL,
											 format text DEFAULT NULL,
											 value_schema jsonb DEFAULT NULL,
											 key_schema jsonb DEFAULT NULL,
											 cloudevents_source text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_set_topic'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_set_topic(text, text, text, text, jsonb, jsonb, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_set_topic(text, text, text, text, jsonb, jsonb, text) IS
	'Set the settings of the topics a pattern matches: the cluster their events go to (brokers, properties file; NULL for the outbox.* setting) and the format of their records (NULL: as given; avro with its schemas; cloudevents with its source). Superusers only.';

CREATE FUNCTION @extschema@.outbox_reset_topic(pattern text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'outbox_reset_topic'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_reset_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_reset_topic(text) IS
	'Remove the settings of a pattern; false if it had none. Superusers only';

CREATE FUNCTION @extschema@.outbox_topic(topic text, OUT pattern text, OUT brokers text,
										 OUT properties_file text, OUT format text,
										 OUT value_schema_id integer, OUT key_schema_id integer,
										 OUT cloudevents_source text)
RETURNS record
AS 'MODULE_PATHNAME', 'outbox_topic'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_topic(text) IS
	'The settings a topic''s events are published with: the pattern whose row it takes, the brokers and the properties file, the format and its schema ids or source. By grant';

CREATE VIEW @extschema@.outbox_topics AS
	SELECT s.pattern, s.brokers, s.properties_file, s.format, s.value_schema,
		   s.key_schema, s.value_schema_id, s.key_schema_id, s.cloudevents_source,
		   s.updated_at
	  FROM @extschema@.outbox_topic_settings s;
COMMENT ON VIEW @extschema@.outbox_topics IS
	'The settings of topics by pattern, as outbox_set_topic() set them; NULL is the outbox.* setting.';

CREATE FUNCTION @extschema@.outbox_cluster_status(
	OUT database name, OUT brokers text, OUT state text, OUT state_since timestamptz,
	OUT brokers_up integer, OUT published bigint, OUT failed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_cluster_status'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_cluster_status() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_cluster_status() IS
	'A row per Kafka cluster each running worker publishes to: state up, unreachable (its topics'' events wait) or closed (idle), broker connections up, events published and failed since the worker started; another database''s rows for superusers and pg_monitor only. By grant';

--
-- The operator's view: outbox_health, outbox_attachments, and a description
-- of every object of the extension (\df+, \dv+, \dt+, obj_description()).
--

-- One row per signal of the database's publishing, worst first in
-- attention: status ok, warning or critical; detail says what and where;
-- since, when it began (NULL where that is not known).  The thresholds
-- are the settings outbox.health_backlog_warning and _critical, read here
-- with their defaults where the library is not loaded.  Where the library
-- is not preloaded no worker runs, and outbox_worker_status() is not
-- called (the gate of the worker CTE).
CREATE VIEW @extschema@.outbox_health AS
	WITH settings AS (
		SELECT pg_catalog.current_setting('outbox.max_workers', true) IS NOT NULL AS preloaded,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_warning', true), '60')::pg_catalog.interval AS backlog_warning,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_critical', true), '300')::pg_catalog.interval AS backlog_critical,
			   coalesce(pg_catalog.current_setting('outbox.max_workers', true), '8')::integer AS max_workers,
			   coalesce(pg_catalog.current_setting('outbox.brokers', true), 'localhost:9092') AS brokers,
			   coalesce(pg_catalog.current_setting('outbox.standby_slots', true), '') AS standby_slots
	), workers AS MATERIALIZED (
		SELECT w.*
		  FROM @extschema@.outbox_worker_status() w
		 WHERE (SELECT s.preloaded FROM settings s)
	), mine AS (
		SELECT w.*
		  FROM workers w
		 WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database() OR w.database IS NULL
	), down AS (
		SELECT pg_catalog.string_agg(c.brokers, '; ' ORDER BY c.brokers) AS clusters,
			   pg_catalog.min(c.state_since) AS since
		  FROM @extschema@.outbox_cluster_status() c
		 WHERE (SELECT s.preloaded FROM settings s)
		   AND c.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
		   AND c.state OPERATOR(pg_catalog.=) 'unreachable'
	), oldest AS (
		SELECT d.topic, d.created_at
		  FROM (SELECT m.topic, m.created_at
				  FROM @extschema@.outbox_retries m
				 WHERE m.status OPERATOR(pg_catalog.=) ANY ('{pending,failed}')
				   AND (m.next_attempt_at IS NULL OR m.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now())
				UNION ALL
				SELECT u.topic, u.oldest_created_at
				  FROM @extschema@.outbox_unread_topics() u
				 WHERE u.oldest_created_at IS NOT NULL) AS d
		 ORDER BY d.created_at
		 LIMIT 1
	), failing AS (
		SELECT m.topic, pg_catalog.count(*) AS events, pg_catalog.min(m.created_at) AS since,
			   (pg_catalog.array_agg(m.last_error ORDER BY m.id DESC))[1] AS last_error
		  FROM @extschema@.outbox_retries m
		 WHERE m.status OPERATOR(pg_catalog.=) 'failed'
		 GROUP BY m.topic
	), abandoned AS (
		SELECT pg_catalog.sum(s.abandoned) AS last_hour, pg_catalog.min(s.bucket) AS since,
			   pg_catalog.string_agg(DISTINCT s.topic, ', ') AS topics
		  FROM @extschema@.outbox_publish_stats s
		 WHERE s.abandoned OPERATOR(pg_catalog.>) 0
		   AND s.bucket OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 hour')
	), missing_slots AS (
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(pg_catalog.btrim(l.slot)), ', ') AS slots
		  FROM settings s,
			   pg_catalog.unnest(pg_catalog.string_to_array(s.standby_slots, ',')) AS l(slot)
		 WHERE pg_catalog.btrim(l.slot) OPERATOR(pg_catalog.<>) ''
		   AND NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots r
							WHERE r.slot_name OPERATOR(pg_catalog.=) pg_catalog.btrim(l.slot)::name)
	), signals AS (
		SELECT 1 AS ord, 'worker' AS signal,
			   CASE WHEN w.state IS NULL THEN 'critical'
					WHEN w.state OPERATOR(pg_catalog.=) ANY ('{idle,publishing,parked,"broker unreachable","waiting for standby",standby}') THEN 'ok'
					WHEN w.state OPERATOR(pg_catalog.=) ANY ('{starting,disabled,"waiting for restore","waiting for worker slot"}') THEN 'warning'
					ELSE 'critical' END AS status,
			   CASE WHEN w.state IS NOT NULL THEN w.state OPERATOR(pg_catalog.||) coalesce(': ' OPERATOR(pg_catalog.||) w.last_error, '')
					WHEN NOT s.preloaded THEN 'no worker runs: outbox is not in shared_preload_libraries'
					ELSE 'no worker serves this database: it is not in outbox.databases' END AS detail,
			   w.state_since AS since
		  FROM settings s LEFT JOIN mine w ON true
		UNION ALL
		SELECT 2, 'brokers',
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' OR d.clusters IS NOT NULL
					THEN 'critical' ELSE 'ok' END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable'
					THEN pg_catalog.format('no broker of %s answers: %s', s.brokers, w.last_error)
					WHEN d.clusters IS NOT NULL
					THEN pg_catalog.format('no broker of cluster %s answers: its topics wait', d.clusters)
					WHEN w.brokers_up IS NULL THEN pg_catalog.format('%s: no producer now', s.brokers)
					ELSE pg_catalog.format('%s: %s brokers up', s.brokers, w.brokers_up) END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' THEN w.state_since
					ELSE d.since END
		  FROM settings s CROSS JOIN down d LEFT JOIN mine w ON true
		UNION ALL
		SELECT 3, 'backlog age',
			   CASE WHEN o.created_at IS NULL THEN 'ok'
					WHEN pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at OPERATOR(pg_catalog.>) s.backlog_critical THEN 'critical'
					WHEN pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at OPERATOR(pg_catalog.>) s.backlog_warning THEN 'warning'
					ELSE 'ok' END,
			   CASE WHEN o.created_at IS NULL THEN 'no event is due'
					ELSE pg_catalog.format('the oldest due event, of topic %s, is %s old',
										   o.topic, pg_catalog.to_char(pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at, 'HH24:MI:SS')) END,
			   o.created_at
		  FROM settings s LEFT JOIN oldest o ON true
		UNION ALL
		SELECT 4, 'failing topics',
			   CASE WHEN pg_catalog.count(f.topic) OPERATOR(pg_catalog.>) 0 THEN 'critical' ELSE 'ok' END,
			   coalesce(pg_catalog.string_agg(pg_catalog.format('topic %s: %s events failing: %s', f.topic, f.events, f.last_error),
											  '; ' ORDER BY f.topic),
						'no topic is failing'),
			   pg_catalog.min(f.since)
		  FROM failing f
		UNION ALL
		SELECT 5, 'abandoned events',
			   CASE WHEN a.last_hour OPERATOR(pg_catalog.>) 0 THEN 'warning' ELSE 'ok' END,
			   CASE WHEN a.last_hour OPERATOR(pg_catalog.>) 0
					THEN pg_catalog.format('%s events abandoned in the last hour, of topics %s', a.last_hour, a.topics)
					ELSE 'no event abandoned in the last hour' END,
			   a.since
		  FROM abandoned a
		UNION ALL
		SELECT 6, 'snapshots',
			   CASE WHEN pg_catalog.count(n.last_error) OPERATOR(pg_catalog.>) 0 THEN 'warning' ELSE 'ok' END,
			   CASE WHEN pg_catalog.count(n.last_error) OPERATOR(pg_catalog.>) 0
					THEN pg_catalog.string_agg(pg_catalog.format('snapshot of %s: %s', n.relid::pg_catalog.regclass, n.last_error), '; ')
					ELSE pg_catalog.format('%s in progress', pg_catalog.count(*)) END,
			   pg_catalog.min(n.started) FILTER (WHERE n.last_error IS NOT NULL)
		  FROM @extschema@.outbox_snapshots_state n
		 WHERE n.finished IS NULL
		UNION ALL
		SELECT 7, 'worker slots',
			   CASE WHEN pg_catalog.min(w.state_since) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot')
						 OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) s.backlog_warning) THEN 'critical'
					WHEN pg_catalog.count(*) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot') OPERATOR(pg_catalog.>) 0 THEN 'warning'
					WHEN pg_catalog.count(w.pid) OPERATOR(pg_catalog.>=) s.max_workers THEN 'warning'
					ELSE 'ok' END,
			   pg_catalog.format('%s of outbox.max_workers = %s in use', pg_catalog.count(w.pid), s.max_workers)
			   OPERATOR(pg_catalog.||)
			   coalesce('; waiting for one: ' OPERATOR(pg_catalog.||)
						pg_catalog.string_agg(pg_catalog.format('%I (%s)', w.database, w.last_error), ', ')
						FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot'), ''),
			   pg_catalog.min(w.state_since) FILTER (WHERE w.state OPERATOR(pg_catalog.=) 'waiting for worker slot')
		  FROM settings s LEFT JOIN workers w ON true
		 GROUP BY s.max_workers, s.backlog_warning
		UNION ALL
		SELECT 8, 'standby gate',
			   CASE WHEN s.standby_slots OPERATOR(pg_catalog.=) '' THEN 'ok'
					WHEN m.slots IS NOT NULL THEN 'critical'
					WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN 'warning'
					ELSE 'ok' END,
			   CASE WHEN s.standby_slots OPERATOR(pg_catalog.=) '' THEN 'outbox.standby_slots is not set'
					WHEN m.slots IS NOT NULL THEN 'replication slots of outbox.standby_slots that do not exist: ' OPERATOR(pg_catalog.||) m.slots
					WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN w.last_error
					ELSE 'the standbys of ' OPERATOR(pg_catalog.||) s.standby_slots OPERATOR(pg_catalog.||) ' keep up' END,
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'waiting for standby' THEN w.state_since END
		  FROM settings s CROSS JOIN missing_slots m LEFT JOIN mine w ON true
		UNION ALL
		SELECT 9, 'version',
			   CASE WHEN e.extversion OPERATOR(pg_catalog.=) a.default_version THEN 'ok' ELSE 'warning' END,
			   CASE WHEN e.extversion OPERATOR(pg_catalog.=) a.default_version
					THEN pg_catalog.format('outbox %s', e.extversion)
					ELSE pg_catalog.format('outbox %s, and the installed scripts are at %s: ALTER EXTENSION outbox UPDATE',
										   e.extversion, a.default_version) END,
			   NULL::timestamptz
		  FROM pg_catalog.pg_extension e
		  LEFT JOIN pg_catalog.pg_available_extensions a ON a.name OPERATOR(pg_catalog.=) e.extname
		 WHERE e.extname OPERATOR(pg_catalog.=) 'outbox'
	)
	SELECT g.signal, g.status, g.detail, g.since
	  FROM signals g
	 ORDER BY g.ord;
REVOKE ALL ON @extschema@.outbox_health FROM PUBLIC;

-- Who attached each table, and when: written by outbox_attach and
-- outbox_attach_router, deleted by outbox_detach.  Tables attached before
-- 1.3 have no row.
CREATE TABLE @extschema@.outbox_attached (
	relid			oid PRIMARY KEY,
	attached_by		name NOT NULL,
	attached_at		timestamptz NOT NULL
);

-- The tables attached, from their triggers: kind capture (outbox_attach)
-- or router (outbox_attach_router), the format of their records, the
-- topic (capture in the outbox format), the prefix of the topics
-- (<prefix>.<schema>.<table>, the debezium format) or the pattern
-- (router), the other options as the trigger's name=value arguments.
CREATE VIEW @extschema@.outbox_attachments AS
	WITH attachments AS (
		SELECT t.tgrelid, t.tgname,
			   -- each argument ends with a zero byte
			   ARRAY(SELECT pg_catalog.convert_from(pg_catalog.substr(t.tgargs, b.start,
																	 b.stop OPERATOR(pg_catalog.-) b.start),
													pg_catalog.getdatabaseencoding())
					   FROM (SELECT z.i AS stop,
									coalesce(pg_catalog.lag(z.i) OVER (ORDER BY z.i), 0) OPERATOR(pg_catalog.+) 1 AS start
							   FROM pg_catalog.generate_series(1, pg_catalog.length(t.tgargs)) AS z(i)
							  WHERE pg_catalog.get_byte(t.tgargs, z.i OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) 0) AS b
					  ORDER BY b.stop) AS args
		  FROM pg_catalog.pg_trigger t
		 WHERE (t.tgname OPERATOR(pg_catalog.=) 'outbox_capture'
				AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.outbox_capture()'::pg_catalog.regprocedure)
			OR (t.tgname OPERATOR(pg_catalog.=) 'outbox_router'
				AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.outbox_router()'::pg_catalog.regprocedure)
	), parsed AS (
		SELECT a.tgrelid,
			   CASE WHEN a.tgname OPERATOR(pg_catalog.=) 'outbox_router' THEN 'router' ELSE 'capture' END AS kind,
			   CASE WHEN a.tgname OPERATOR(pg_catalog.=) 'outbox_router' THEN 'debezium router'
					WHEN 'format=debezium' OPERATOR(pg_catalog.=) ANY (a.args) THEN 'debezium'
					ELSE 'outbox' END AS format,
			   a.args
		  FROM attachments a
	)
	SELECT p.tgrelid::pg_catalog.regclass AS "table", p.kind, p.format,
		   CASE WHEN p.format OPERATOR(pg_catalog.=) 'outbox' THEN p.args[1]
				ELSE (SELECT pg_catalog.substr(o, 7) FROM pg_catalog.unnest(p.args) AS o
					   WHERE pg_catalog.starts_with(o, 'topic=') LIMIT 1) END AS topic,
		   CASE WHEN p.format OPERATOR(pg_catalog.=) 'outbox'
				THEN ARRAY(SELECT 'key=' OPERATOR(pg_catalog.||) k
							 FROM pg_catalog.unnest(p.args[2:]) WITH ORDINALITY AS x(k, n) ORDER BY x.n)
				ELSE ARRAY(SELECT o FROM pg_catalog.unnest(p.args) WITH ORDINALITY AS x(o, n)
							WHERE NOT pg_catalog.starts_with(o, 'topic=')
							  AND o OPERATOR(pg_catalog.<>) 'format=debezium'
							ORDER BY x.n) END AS options,
		   w.attached_by, w.attached_at
	  FROM parsed p
	  LEFT JOIN @extschema@.outbox_attached w ON w.relid OPERATOR(pg_catalog.=) p.tgrelid
	 ORDER BY p.tgrelid::pg_catalog.regclass::text;
REVOKE ALL ON @extschema@.outbox_attachments FROM PUBLIC;
COMMENT ON TABLE @extschema@.outbox_attached IS
	'Who attached each table and when, from 1.3 on (outbox_attachments shows it); written by the attach functions as the extension''s owner';
COMMENT ON VIEW @extschema@.outbox_attachments IS
	'The tables attached: kind capture or router, format, topic (the prefix, or the router''s pattern), options, attached_by, attached_at. Read by whom it is granted to (nothing to PUBLIC)';
COMMENT ON VIEW @extschema@.outbox_health IS
	'One row per signal (worker, brokers, backlog age, failing topics, abandoned events, snapshots, worker slots, standby gate, version): status ok, warning or critical, detail, since. A reader also needs EXECUTE on outbox_worker_status(), outbox_cluster_status() and outbox_unread_topics()';

-- The rest of the extension's objects, described where psql's \d+ and
-- \df+ show it: what, the arguments, who may call.  Nothing is granted to
-- PUBLIC: "by grant" means superusers, the extension's owner, and the
-- roles a superuser grants it to.
COMMENT ON TYPE @extschema@.outbox_status IS
	'Status of an event: pending, published, failed (waits for its next attempt), abandoned; processing is not used';
COMMENT ON SEQUENCE @extschema@.outbox_event_id_seq IS
	'The events'' ids: their publish order';
DO $$
BEGIN
	FOR t IN 0..3 LOOP
		EXECUTE pg_catalog.format('COMMENT ON TABLE @extschema@.%I IS %L', 'outbox_log_' || t,
			'A table of the log ring (outbox_log): outbox_enqueue appends, the rotation empties it by TRUNCATE');
	END LOOP;
END
$$;
COMMENT ON TABLE @extschema@.outbox_event_ids IS
	'Event ids given to outbox_enqueue, unique: a duplicate fails with 23505; kept while the event is';
COMMENT ON TABLE @extschema@.outbox_reader IS
	'One row: where the worker''s claim is in the log (the last id read, the transactions still running then) and which log table enqueue writes to';

COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, jsonb, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (jsonb, as PostgreSQL prints it), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';
COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, text, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (text, as UTF-8; an untyped literal), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';
COMMENT ON FUNCTION @extschema@.outbox_enqueue(text, bytea, text, jsonb, uuid) IS
	'Store an event in the current transaction, published once it commits: topic, payload (bytea, as given), key (NULL: none), headers (a JSON object of strings), event_id (NULL: a new uuid); returns its id. By grant: grant all three overloads to an application role';
COMMENT ON FUNCTION @extschema@.outbox_capture() IS
	'Trigger function of outbox_attach: each changed row becomes an event; its arguments are the topic, format and keys. Runs with the rights of the role that changed the row';
COMMENT ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text) IS
	'Capture the changes of table tbl as events on topic (the prefix, format debezium), keyed by key_columns (else the primary key); format outbox or debezium; snapshot: publish its rows too; with format debezium, the connector''s settings tombstones (tombstones.on.delete), decimal_handling (precise, string, double), skipped_operations (skipped.operations), schemas_enable (the JSON converter''s), converter (json, or avro: Confluent''s AvroConverter, the schemas registered at outbox.schema_registry_url), NULL for the connector''s default. By grant, with the table''s TRIGGER privilege (SELECT for a snapshot)';
COMMENT ON FUNCTION @extschema@.outbox_router() IS
	'Trigger function of outbox_attach_router: each inserted row becomes the record Debezium''s outbox event router writes. Runs with the rights of the role that inserted';
COMMENT ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean) IS
	'Publish each row inserted into outbox table tbl as Debezium''s outbox event router does: topic_pattern with ${routedByValue} from column route_by, key_column, id_column (header id), payload_column, timestamp_column, header_columns (column:header); the converters'' settings expand_payload, key_converter (json or string), schemas_enable, tombstone_on_empty_payload. By grant, with the table''s TRIGGER privilege';
COMMENT ON FUNCTION @extschema@.outbox_detach(regclass) IS
	'Drop the triggers of outbox_attach or outbox_attach_router from table tbl, and cancel its snapshot. By grant, with the table''s TRIGGER privilege';
COMMENT ON FUNCTION @extschema@.outbox_retry(bigint) IS
	'Make the failed or abandoned event id pending again, due now, its attempts reset; returns 1, or 0 if it was neither. By grant';
COMMENT ON FUNCTION @extschema@.outbox_retry_abandoned(text) IS
	'Make every abandoned event (of topic, if not NULL) pending again; returns how many. By grant';
COMMENT ON FUNCTION @extschema@.outbox_abandon(bigint) IS
	'Give up the pending or failed event id, releasing the later events of its key (waits for its batch in flight); returns 1, or 0. READ COMMITTED only. By grant';
COMMENT ON FUNCTION @extschema@.outbox_discard() IS
	'Give up every undelivered event, none to the dead-letter topic; returns how many. READ COMMITTED only. By grant';
COMMENT ON FUNCTION @extschema@.outbox_purge() IS
	'Run the retention cleanup now (outbox.published_retention, outbox.abandoned_retention); returns how many rows went. By grant';
COMMENT ON FUNCTION @extschema@.outbox_latency_histogram(double precision[]) IS
	'The latency histogram (128 buckets, bucket floor(4 * log2(1 + ms))) of latencies_ms. For the worker and tests; by grant';
COMMENT ON FUNCTION @extschema@.outbox_histogram_add(bigint[], bigint[]) IS
	'Two latency histograms a and b added bucket by bucket; the step of outbox_histogram_sum. By grant (a monitoring role needs outbox_histogram_sum)';
COMMENT ON AGGREGATE @extschema@.outbox_histogram_sum(bigint[]) IS
	'The sum of latency histograms. By grant: a monitoring role reading outbox_stats or outbox_publish_stats';
COMMENT ON FUNCTION @extschema@.outbox_histogram_quantile(bigint[], double precision) IS
	'The latency (ms) below which a fraction q of a histogram''s deliveries fall, within 19%. By grant: a monitoring role';
COMMENT ON FUNCTION @extschema@.outbox_unread_topics() IS
	'The log''s unread events per topic (topic, unread, oldest_created_at), counted up to 10,000; past that a row with topic NULL bounds the rest. By grant: a monitoring role';
COMMENT ON FUNCTION @extschema@.outbox_worker_status() IS
	'One row per database served or waiting to be, from shared memory: database, pid, state, state_since, started_at, brokers_up, published, failed, last_batch_at, last_error (another database''s for superusers and pg_monitor only). Needs the library preloaded. By grant: a monitoring role';
COMMENT ON FUNCTION @extschema@.outbox_in_progress() IS
	'The transactions in progress in the current snapshot, as the claim sees them. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_log_rows(bigint[]) IS
	'The log''s rows of the events ids. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_unread(bigint, xid8, @extschema@.outbox_reader) IS
	'Whether the log''s event id of transaction txid is unread for the reader row r. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_claim(integer, bigint) IS
	'Claim the next due events, at most batch_size and max_bytes; the transaction must record each outcome before it commits. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_mark_published(bigint[], integer[], bigint[], boolean) IS
	'Record the claimed events ids as delivered at partitions and offsets; keep: keep them as published. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_mark_failed(bigint[], text[], boolean[], integer, interval, interval, double precision, text) IS
	'Record the claimed events ids as refused with errors (permanent: abandon at once), with the retry policy and the dead-letter topic. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_mark_released(bigint[]) IS
	'Release the claimed events ids unsent, due again, no attempt counted. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_retry_delay(integer, interval, interval, double precision) IS
	'The delay before the next attempt after attempts failures: base_delay doubled, at most max_delay, spread by jitter. By grant';
COMMENT ON FUNCTION @extschema@.outbox_dead_letter(bigint[], text) IS
	'Copy the abandoned events ids to dead_letter_topic, with their original topic, id, attempts and error as headers. The worker''s; by grant, for tests and repairs';
COMMENT ON FUNCTION @extschema@.outbox_purge_batch(interval, interval, integer) IS
	'Delete up to batch_size rows of the retry table past their retention; returns how many. The worker''s; by grant';
COMMENT ON FUNCTION @extschema@.outbox_rotate(interval) IS
	'Rotate the log ring: empty a table whose events are all published and past published_retention. The worker''s; by grant';
COMMENT ON FUNCTION @extschema@.outbox_restored() IS
	'Trigger function on the log tables that notes a restore in progress (pg_restore); the extension''s own, nothing else calls it';

COMMENT ON TABLE @extschema@.outbox_log IS
	'The log: every event, appended by outbox_enqueue to one of outbox_log_0 .. 3 and never updated; read it through outbox_messages. No right is needed to enqueue';
COMMENT ON VIEW @extschema@.outbox_stats IS
	'Queue and delivery health per topic, and in total (topic NULL). By grant: a monitoring role, with EXECUTE on outbox_unread_topics(), outbox_histogram_sum and outbox_histogram_quantile';
COMMENT ON VIEW @extschema@.outbox_snapshots IS
	'Snapshots of attached tables: rows published, rows estimated, start and finish, format, topic, last_error, status (running, finished, failed). By grant';
COMMENT ON VIEW @extschema@.outbox_messages IS
	'Every event, one row each: id, event_id, topic, key, payload, headers, status, attempts, next_attempt_at, last_error, created_at, published_at, kafka_partition, kafka_offset. By grant';

--
-- Snapshots: bounded chunks, a key that stays as it was, a status
-- (src/capture/snapshot.c)
--

-- key_types: the type, collation and btree operator family of each walk
-- column when the snapshot was asked for (a chunk that finds another
-- fails the snapshot); failed: when the snapshot failed for good,
-- last_error saying why; chunk_rows: the rows of the next chunk (smaller
-- after one ran out of time; NULL: 1,000); chunk_started: noted, and
-- committed, before a chunk runs, cleared when it ends (a worker that
-- stopped in a chunk leaves it).
ALTER TABLE @extschema@.outbox_snapshots_state
	ADD COLUMN key_types text[],
	ADD COLUMN failed timestamptz,
	ADD COLUMN chunk_rows integer,
	ADD COLUMN chunk_started timestamptz;

-- The snapshots asked for: how far each has got, and its status: running,
-- finished, or failed (last_error says why; asking again starts over).
CREATE OR REPLACE VIEW @extschema@.outbox_snapshots AS
	SELECT s.relid::pg_catalog.regclass AS "table", s.rows_done, s.rows_estimated,
		   s.started, s.finished, s.format, s.topic, s.last_error,
		   CASE WHEN s.failed IS NOT NULL THEN 'failed'
				WHEN s.finished IS NOT NULL THEN 'finished'
				ELSE 'running' END AS status
	  FROM @extschema@.outbox_snapshots_state s;

--
-- The Schema Registry (src/kafka/registry.c): outbox.schema_registry_url,
-- its credentials in the properties file
--

CREATE FUNCTION @extschema@.outbox_registry_check()
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_registry_check'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_registry_check() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_registry_check() IS
	'Whether the schema registry of outbox.schema_registry_url answers: its URL and compatibility level, else an error that says why not. By grant';

-- CloudEvents: the format's settings, as enqueue reads them (src/format/topics.c,
-- src/format/cloudevents.c)
--

-- Enqueue keeps the settings of topics for the session, to know a topic's
-- format without reading the table at each event; each statement that
-- writes the table makes every session read it again.
CREATE FUNCTION @extschema@.outbox_topic_settings_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'outbox_topic_settings_changed'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_topic_settings_changed() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_topic_settings_changed() IS
	'The trigger of outbox_topic_settings: the settings that sessions keep for outbox_enqueue are read again after a change. Nothing else calls it.';
CREATE TRIGGER outbox_topic_settings_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.outbox_topic_settings
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.outbox_topic_settings_changed();
-- ALWAYS: also under session_replication_role = replica (a restore, a
-- subscription that applies the table), or sessions keep stale settings.
ALTER TABLE @extschema@.outbox_topic_settings
	ENABLE ALWAYS TRIGGER outbox_topic_settings_changed;

--
-- Change events in Avro (outbox_attach(..., converter => 'avro'),
-- src/capture/debezium_avro.c): the schema ids the Schema Registry gave,
-- so that a session asks the registry only for a schema it never
-- registered (a table changed by DDL), not at its first change of a table.
-- fingerprint: SHA-256 of the registry's URL, the subject and the schema's
-- text.  A cache: not dumped, rows may go (they are asked for again).
--
CREATE TABLE @extschema@.outbox_schema_ids (
	fingerprint		bytea NOT NULL,
	subject			text NOT NULL,
	schema_id		integer NOT NULL,
	registered_at	timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT outbox_schema_ids_pkey PRIMARY KEY (fingerprint)
);
COMMENT ON TABLE @extschema@.outbox_schema_ids IS
	'The ids the Schema Registry gave the schemas of change events in Avro, by fingerprint of registry, subject and schema: a cache, read and written by the capture trigger as the extension''s owner';
