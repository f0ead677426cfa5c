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
