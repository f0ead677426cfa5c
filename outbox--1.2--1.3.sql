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
-- settings as options (src/router.c).  The triggers that 1.2 made keep
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
