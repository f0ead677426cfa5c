/* outbox--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.3'" to load this file. \quit

--
-- A fresh install of 1.3 is outbox--1.2.sql followed by this script, as
-- pg_stat_statements builds its newest version: t/017_versions.pl proves
-- that it gives the schema of the chain from 1.0.
--

--
-- Topics: per-topic settings, and the Kafka clusters the worker publishes to
--
-- A row per pattern: a topic name, or the start of one followed by '*'. A
-- topic takes the row of the longest pattern that matches it, whole; a
-- column left NULL is the outbox.* setting. Later settings of a topic
-- (its format, its schemas) are further columns of the same row.
--

CREATE TABLE @extschema@.outbox_topic_settings (
	pattern text PRIMARY KEY,
	brokers text,
	properties_file text,
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
											 properties_file text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_set_topic'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_set_topic(text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_set_topic(text, text, text) IS
	'Set the settings of the topics a pattern matches: the cluster their events go to (brokers, properties file; NULL for the outbox.* setting). Superusers only.';

CREATE FUNCTION @extschema@.outbox_reset_topic(pattern text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'outbox_reset_topic'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_reset_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_reset_topic(text) IS
	'Remove the settings of a pattern; false if it had none.';

CREATE FUNCTION @extschema@.outbox_topic(topic text, OUT pattern text, OUT brokers text,
										 OUT properties_file text)
RETURNS record
AS 'MODULE_PATHNAME', 'outbox_topic'
LANGUAGE C STABLE STRICT
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_topic(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.outbox_topic(text) IS
	'The settings a topic''s events are published with: the pattern whose row it takes, the brokers and the properties file.';

CREATE VIEW @extschema@.outbox_topics AS
	SELECT s.pattern, s.brokers, s.properties_file, s.updated_at
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
	'A row per Kafka cluster each running worker publishes to: state up, unreachable (its topics'' events wait) or closed (idle), broker connections up, events published and failed since the worker started.';
