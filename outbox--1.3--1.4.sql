/* outbox--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.4'" to load this file. \quit

--
-- A fresh install of 1.4 is outbox--1.3.sql followed by this script:
-- t/017_versions.pl compares its schema with the chain's from 1.0.
--

--
-- The schema ids of change events in Avro (src/capture/debezium_avro.c):
-- no unique index on the fingerprint, so that a session that keeps the id
-- of a schema never waits for another session's transaction that keeps the
-- same one (a primary key made the second wait for the first to end, and
-- two tables written in opposite orders deadlock). Both rows serve; the
-- worker removes the second. REPLICA IDENTITY FULL: a publication FOR ALL
-- TABLES takes its deletes.
--
ALTER TABLE @extschema@.outbox_schema_ids DROP CONSTRAINT outbox_schema_ids_pkey;
CREATE INDEX outbox_schema_ids_fingerprint ON @extschema@.outbox_schema_ids (fingerprint);
ALTER TABLE @extschema@.outbox_schema_ids REPLICA IDENTITY FULL;
COMMENT ON TABLE @extschema@.outbox_schema_ids IS
	'The ids the Schema Registry gave the schemas of change events in Avro, by fingerprint of registry, subject and schema: a cache, read and written by the capture trigger as the extension''s owner; a fingerprint may have several rows, any of them serves, and the worker removes all but one';

--
-- The schema registry in outbox_health: a warning while its credentials
-- would go over plain http: a function that the view below calls.
--

CREATE FUNCTION @extschema@.outbox_registry_warning()
RETURNS text
AS 'MODULE_PATHNAME', 'outbox_registry_warning'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_registry_warning() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_registry_warning() IS
	'For outbox_health: NULL, or that this session''s outbox.schema_registry_url is plain http while the file of outbox.kafka_properties_file holds the registry''s credentials (never them). By grant';

--
-- The clusters: outbox_cluster_status() names each producer by its brokers
-- and the properties file it reads, as many as a worker has; outbox_health
-- counts the clusters that do not answer among all of them.
--

-- The update replaces outbox_cluster_status() (a new column),
-- outbox_attach_router() and outbox_attach() (a new argument each, at the
-- end of this script): what
-- was granted on them is said, to be granted again (a grant made here
-- would be taken for the extension's own, which pg_dump does not dump).
DO $$
DECLARE
	f record;
	grantees text;
BEGIN
	FOR f IN
		SELECT * FROM (VALUES
			('outbox_cluster_status()',
			 '@extschema@.outbox_cluster_status()'::pg_catalog.regprocedure,
			 'Those roles cannot read the function, nor the view outbox_health, until it is granted to them again.'),
			('outbox_attach_router',
			 '@extschema@.outbox_attach_router(pg_catalog.regclass, pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.bool, pg_catalog.text, pg_catalog.bool, pg_catalog.bool)'::pg_catalog.regprocedure,
			 'Those roles cannot attach an outbox table until it is granted to them again.'),
			('outbox_attach',
			 '@extschema@.outbox_attach(pg_catalog.regclass, pg_catalog.text, pg_catalog.text[], pg_catalog.text, pg_catalog.bool, pg_catalog.bool, pg_catalog.text, pg_catalog.text, pg_catalog.bool, pg_catalog.text)'::pg_catalog.regprocedure,
			 'Those roles cannot attach a table until it is granted to them again.')
		) AS v(name, proc, detail)
	LOOP
		SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
										  ELSE pg_catalog.quote_ident(r.rolname) END,
									 ', ' ORDER BY r.rolname)
		  INTO grantees
		  FROM pg_catalog.pg_proc p
		 CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
		  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
		 WHERE p.oid OPERATOR(pg_catalog.=) f.proc
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
		IF grantees IS NOT NULL THEN
			RAISE WARNING 'EXECUTE on % is granted to %, and the update replaces the function', f.name, grantees
				USING DETAIL = f.detail,
					  HINT = 'Once the update is done: GRANT EXECUTE ON FUNCTION @extschema@.'
							 OPERATOR(pg_catalog.||) f.name OPERATOR(pg_catalog.||) ' TO '
							 OPERATOR(pg_catalog.||) grantees OPERATOR(pg_catalog.||) ';';
		END IF;
	END LOOP;
END
$$;

-- outbox_health, which calls the function, for the time of its replacement
CREATE OR REPLACE VIEW @extschema@.outbox_health AS
	SELECT NULL::text AS signal, NULL::text AS status, NULL::text COLLATE pg_catalog."C" AS detail,
		   NULL::timestamptz AS since
	 WHERE false;

DROP FUNCTION @extschema@.outbox_cluster_status();
CREATE FUNCTION @extschema@.outbox_cluster_status(
	OUT database name, OUT brokers text, OUT properties_file text, OUT state text,
	OUT state_since timestamptz, OUT brokers_up integer, OUT published bigint,
	OUT failed bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'outbox_cluster_status'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_cluster_status() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_cluster_status() IS
	'A row per Kafka cluster each running worker publishes to, however many, the unreachable ones first: brokers and properties_file (the file its producer reads, empty for none), state up, unreachable (its topics'' events wait) or closed (idle), broker connections up, events published and failed since the worker started; another database''s rows for superusers and pg_monitor only. By grant';

-- One row per signal, as in 1.3; the signal brokers is critical while any
-- cluster does not answer, and names each that does not (brokers and
-- properties file) among how many; the signal schema registry warns while
-- its credentials would go over plain http.
CREATE OR REPLACE VIEW @extschema@.outbox_health AS
	WITH settings AS (
		SELECT pg_catalog.current_setting('outbox.max_workers', true) IS NOT NULL AS preloaded,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_warning', true), '60')::pg_catalog.interval AS backlog_warning,
			   coalesce(pg_catalog.current_setting('outbox.health_backlog_critical', true), '300')::pg_catalog.interval AS backlog_critical,
			   coalesce(pg_catalog.current_setting('outbox.max_workers', true), '8')::integer AS max_workers,
			   coalesce(pg_catalog.current_setting('outbox.brokers', true), 'localhost:9092') AS brokers,
			   coalesce(pg_catalog.current_setting('outbox.standby_slots', true), '') AS standby_slots,
			   coalesce(pg_catalog.current_setting('outbox.schema_registry_url', true), '') AS registry_url
	), workers AS MATERIALIZED (
		SELECT w.*
		  FROM @extschema@.outbox_worker_status() w
		 WHERE (SELECT s.preloaded FROM settings s)
	), mine AS (
		SELECT w.*
		  FROM workers w
		 WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database() OR w.database IS NULL
	), clusters AS (
		SELECT pg_catalog.count(*) AS total,
			   pg_catalog.count(*) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'unreachable') AS down,
			   pg_catalog.string_agg(c.brokers OPERATOR(pg_catalog.||)
									 CASE WHEN c.properties_file OPERATOR(pg_catalog.=) '' THEN ''
										  ELSE pg_catalog.format(' (properties file %s)', c.properties_file) END,
									 '; ' ORDER BY c.brokers, c.properties_file)
				   FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'unreachable') AS down_names,
			   pg_catalog.min(c.state_since) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 'unreachable') AS since
		  FROM @extschema@.outbox_cluster_status() c
		 WHERE (SELECT s.preloaded FROM settings s)
		   AND c.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
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
			   CASE WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' OR d.down OPERATOR(pg_catalog.>) 0
					THEN 'critical' ELSE 'ok' END,
			   CASE WHEN d.total OPERATOR(pg_catalog.=) 1 AND d.down OPERATOR(pg_catalog.=) 1
					THEN pg_catalog.format('no broker of cluster %s answers: its topics'' events wait', d.down_names)
					WHEN d.down OPERATOR(pg_catalog.>) 0 AND d.down OPERATOR(pg_catalog.=) d.total
					THEN pg_catalog.format('none of the %s clusters answers, their topics'' events wait: %s',
										   d.total, d.down_names)
					WHEN d.down OPERATOR(pg_catalog.>) 0
					THEN pg_catalog.format('%s of %s clusters unreachable, their topics'' events wait: %s',
										   d.down, d.total, d.down_names)
					WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable'
					THEN pg_catalog.format('no broker of %s answers: %s', s.brokers, w.last_error)
					WHEN w.brokers_up IS NULL THEN pg_catalog.format('%s: no producer now', s.brokers)
					WHEN d.total OPERATOR(pg_catalog.>) 1
					THEN pg_catalog.format('%s clusters, all up', d.total)
					ELSE pg_catalog.format('%s: %s up', s.brokers,
										   CASE WHEN w.brokers_up OPERATOR(pg_catalog.=) 1 THEN '1 broker'
												ELSE w.brokers_up OPERATOR(pg_catalog.||) ' brokers' END) END,
			   CASE WHEN d.down OPERATOR(pg_catalog.>) 0 THEN d.since
					WHEN w.state OPERATOR(pg_catalog.=) 'broker unreachable' THEN w.state_since END
		  FROM settings s CROSS JOIN clusters d LEFT JOIN mine w ON true
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
		UNION ALL
		SELECT 10, 'schema registry',
			   CASE WHEN r.warning IS NULL THEN 'ok' ELSE 'warning' END,
			   coalesce(r.warning,
						CASE WHEN s.registry_url OPERATOR(pg_catalog.=) '' THEN 'outbox.schema_registry_url is not set'
							 ELSE s.registry_url END),
			   NULL::timestamptz
		  FROM settings s CROSS JOIN (SELECT @extschema@.outbox_registry_warning() AS warning) r
	)
	SELECT g.signal, g.status, g.detail, g.since
	  FROM signals g
	 ORDER BY g.ord;
COMMENT ON VIEW @extschema@.outbox_health IS
	'One row per signal (worker, brokers, backlog age, failing topics, abandoned events, snapshots, worker slots, standby gate, version, schema registry): status ok, warning or critical, detail, since. A reader also needs EXECUTE on outbox_worker_status(), outbox_cluster_status(), outbox_unread_topics() and outbox_registry_warning()';

--
-- The outbox event router with Confluent's AvroConverter: converter
-- (json, or avro: the value with the payload column's schema, the key with
-- the key column's, registered under <topic>-value and <topic>-key,
-- src/capture/router.c); key_converter NULL by default, the converter's.
-- The routers attached before keep their triggers' options.  The update
-- replaces the function: what was granted on it is said at the start.
--
DROP FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean);
CREATE FUNCTION @extschema@.outbox_attach_router(tbl regclass,
	topic_pattern text DEFAULT 'outbox.event.${routedByValue}',
	route_by text DEFAULT 'aggregatetype', key_column text DEFAULT 'aggregateid',
	id_column text DEFAULT 'id', payload_column text DEFAULT 'payload',
	timestamp_column text DEFAULT NULL, header_columns text[] DEFAULT NULL,
	expand_payload boolean DEFAULT false, key_converter text DEFAULT NULL,
	schemas_enable boolean DEFAULT false,
	tombstone_on_empty_payload boolean DEFAULT false,
	converter text DEFAULT 'json')
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach_router'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_attach_router(regclass, text, text, text, text, text, text, text[], boolean, text, boolean, boolean, text) IS
	'Publish each row inserted into outbox table tbl as Debezium''s outbox event router does: topic_pattern with ${routedByValue} from column route_by, key_column, id_column (header id), payload_column, timestamp_column, header_columns (column:header); the converters'' settings expand_payload, key_converter (json, string or avro; NULL: the converter''s), schemas_enable, tombstone_on_empty_payload, converter (json, or avro: Confluent''s AvroConverter with outbox.schema_registry_url). By grant, with the table''s TRIGGER privilege';

--
-- Debezium's column defaults: outbox_attach(..., replace_null_with_default)
-- (Kafka's replace.null.with.default).  A trigger attached from 1.4 on
-- writes each column's default as the connector has it, and the enum
-- arrays, tsvector and ltree as it names them; one attached before keeps
-- what it wrote until attached again (src/format/debezium.c).  The update
-- replaces the function: what was granted on it is said at the start.
--

DROP FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text);
CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL, format text DEFAULT 'outbox',
	snapshot boolean DEFAULT false, tombstones boolean DEFAULT NULL,
	decimal_handling text DEFAULT NULL, skipped_operations text DEFAULT NULL,
	schemas_enable boolean DEFAULT NULL, converter text DEFAULT NULL,
	replace_null_with_default boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean, text, boolean) IS
	'Capture the changes of table tbl as events on topic (the prefix, format debezium), keyed by key_columns (else the primary key); format outbox or debezium; snapshot: publish its rows too; with format debezium, the connector''s settings tombstones (tombstones.on.delete), decimal_handling (precise, string, double), skipped_operations (skipped.operations), schemas_enable (the JSON converter''s), converter (json, or avro: Confluent''s AvroConverter, the schemas registered at outbox.schema_registry_url), replace_null_with_default (a null written as its column''s default, Kafka''s replace.null.with.default), NULL for the connector''s default. By grant, with the table''s TRIGGER privilege (SELECT for a snapshot)';

--
-- Capture: outbox_capture() looks up no name through search_path, and the
-- only SQL it runs is the extension's own (the Avro converter's schema ids,
-- as the extension's owner), schema-qualified with qualified operators, as
-- outbox_enqueue's; it runs with the rights of the role that changed the
-- row.  Its pinned search_path cost a tenth of a captured change; it pins
-- pg_catalog, pg_temp itself while the text of one of the table's columns
-- may read search_path (reg* types, composites, extensions' types), so
-- that events keep their bytes (src/capture/tables.c).
--
ALTER FUNCTION @extschema@.outbox_capture() RESET search_path;

--
-- The router: outbox_router() looks up no name through search_path either
-- (its columns are found by name in the table's descriptor, its values
-- written by C code: timestamps, uuid, json and jsonb, the expanded
-- payload), and the only SQL it runs is the extension's own (the Avro
-- converter's schema ids, as the extension's owner), schema-qualified with
-- qualified operators; it runs with the rights of the role that inserted
-- the row.  Its pinned search_path cost a tenth of a routed insert; it
-- pins pg_catalog, pg_temp itself while a column it reads may be written
-- as text that reads search_path (reg* types, composites, extensions'
-- types), so that records keep their bytes (src/capture/router.c).
--
ALTER FUNCTION @extschema@.outbox_router() RESET search_path;
