--
-- What a snapshot may be asked for on (the worker, which takes them, is
-- off here): a key that bounds its chunks, and a reader who may read
-- every row
--
SET client_min_messages = warning;

-- the key must be the columns of a unique index, NOT NULL
CREATE TABLE grouped (id int NOT NULL, grp int NOT NULL, v text);
CREATE TABLE loose_unique (k int NOT NULL, v text);
CREATE UNIQUE INDEX ON loose_unique (k) WHERE k > 0;
CREATE TABLE pairs (a int NOT NULL, b text NOT NULL, UNIQUE (b, a));
SELECT outbox_attach('grouped', 'g', ARRAY['grp'], 'debezium', true);
\echo :LAST_ERROR_SQLSTATE
SELECT outbox_attach('loose_unique', 'l', ARRAY['k'], 'debezium', true);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS snapshots FROM outbox_snapshots;
-- the primary key (the events keyed by other columns), or the columns of
-- a unique index in any order
ALTER TABLE grouped ADD PRIMARY KEY (id);
SELECT outbox_attach('grouped', 'g', ARRAY['grp'], 'debezium', true);
SELECT outbox_attach('pairs', 'p', ARRAY['a', 'b'], 'debezium', true);
SELECT "table", status, last_error FROM outbox_snapshots ORDER BY 1::text;

-- row-level security: a role under a policy may not snapshot what the
-- table's owner would read for her; the owner may, under FORCE too
CREATE ROLE snap_owner;
CREATE ROLE snap_reader;
CREATE TABLE secrets (id int PRIMARY KEY, who name NOT NULL);
INSERT INTO secrets SELECT i, CASE WHEN i <= 2 THEN 'snap_reader' ELSE 'other' END
  FROM generate_series(1, 10) i;
ALTER TABLE secrets OWNER TO snap_owner;
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON secrets USING (who = current_user);
GRANT SELECT, TRIGGER ON secrets TO snap_reader;
GRANT TRIGGER ON secrets TO snap_owner;
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN SELECT p.oid FROM pg_proc p WHERE p.proname IN ('outbox_attach', 'outbox_capture')
	LOOP
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO snap_reader, snap_owner', f);
	END LOOP;
END
$$;
SET ROLE snap_reader;
SELECT count(*) AS she_reads FROM secrets;
SELECT outbox_attach('secrets', 'mine', snapshot => true);
\echo :LAST_ERROR_SQLSTATE
-- without a snapshot she may attach it
SELECT outbox_attach('secrets', 'mine');
RESET ROLE;
SELECT count(*) AS snapshots FROM outbox_snapshots WHERE "table" = 'secrets'::regclass;
-- a role RLS does not apply to may; so may the owner, with FORCE too
ALTER TABLE secrets DISABLE ROW LEVEL SECURITY;
SET ROLE snap_reader;
SELECT outbox_attach('secrets', 'mine', snapshot => true);
RESET ROLE;
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
SET ROLE snap_owner;
SELECT outbox_attach('secrets', 'mine', snapshot => true);
RESET ROLE;
SELECT "table", status FROM outbox_snapshots WHERE "table" = 'secrets'::regclass;

SELECT outbox_detach(t) FROM unnest('{grouped,pairs,secrets}'::regclass[]) t;
DROP TABLE grouped, loose_unique, pairs, secrets;
DROP OWNED BY snap_owner, snap_reader;
DROP ROLE snap_owner, snap_reader;
