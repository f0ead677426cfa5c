/* outbox--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.3'" to load this file. \quit

--
-- A fresh install of 1.3 is outbox--1.2.sql followed by this script, as
-- pg_stat_statements builds its newest version: t/017_versions.pl proves
-- that it gives the schema of the chain from 1.0.
--

--
-- Change events with the defaults of Debezium's PostgreSQL connector, and
-- its settings as options of outbox_attach: decimal_handling
-- (decimal.handling.mode), tombstones (tombstones.on.delete),
-- skipped_operations (skipped.operations), schemas_enable (the JSON
-- converter's schemas.enable); NULL gives the connector's default
-- (src/capture.c, src/debezium.c).  The triggers attached before keep
-- their arguments, and what they wrote.
--
DROP FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean);
CREATE FUNCTION @extschema@.outbox_attach(tbl regclass, topic text,
	key_columns text[] DEFAULT NULL, format text DEFAULT 'outbox',
	snapshot boolean DEFAULT false, tombstones boolean DEFAULT NULL,
	decimal_handling text DEFAULT NULL, skipped_operations text DEFAULT NULL,
	schemas_enable boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'outbox_attach'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.outbox_attach(regclass, text, text[], text, boolean, boolean, text, text, boolean) FROM PUBLIC;
