/* outbox--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION outbox UPDATE TO '1.3'" to load this file. \quit

--
-- A fresh install of 1.3 is outbox--1.2.sql followed by this script, as
-- pg_stat_statements builds its newest version: t/017_versions.pl proves
-- that it gives the schema of the chain from 1.0.
--

--
-- Snapshots: bounded chunks, a key that stays as it was, a status
-- (src/snapshot.c)
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
