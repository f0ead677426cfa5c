--
-- Dropping the extension drops its events: DROP EXTENSION, and DROP SCHEMA
-- ... CASCADE or DROP OWNED BY that would drop it, refuse (2BP01) while an
-- event is not delivered, saying how many; outbox_discard() gives them up
-- on purpose, and then the drop goes through.  Published and abandoned
-- events do not hold it.  (The refusal is the preloaded library's hook.)
--
SELECT outbox_discard() >= 0 AS discarded;
DROP EXTENSION outbox;
-- nothing undelivered: dropped as ever
CREATE EXTENSION outbox;
DROP EXTENSION outbox;

CREATE EXTENSION outbox;
SELECT outbox_enqueue('drop.t', 'e1'::text, key => 'k');
DROP EXTENSION outbox;
\echo :LAST_ERROR_SQLSTATE
SELECT count(outbox_enqueue('drop.t', ('e' || i)::text, key => 'k')) FROM generate_series(2, 5) i;
\set VERBOSITY terse
DROP EXTENSION outbox;
DROP EXTENSION outbox CASCADE;
DROP EXTENSION IF EXISTS outbox_no_such_extension, outbox;
-- however the statement is run
DO $$ BEGIN EXECUTE 'DROP EXTENSION outbox'; END $$;
BEGIN;
DROP EXTENSION outbox;
ROLLBACK;
\set VERBOSITY default
SELECT extname FROM pg_extension WHERE extname = 'outbox';

-- the retry table's failed and pending events count, published ones do not
BEGIN;
SELECT id, key FROM outbox_claim(3);
SELECT outbox_mark_published('{1}', '{0}', '{100}', true);
SELECT outbox_mark_failed('{2,3}', '{"Broker: Not enough in-sync replicas","Broker: Not enough in-sync replicas"}',
						  '{f,f}', 10, '1s', '1min', 0, NULL);
COMMIT;
SELECT id, status, attempts FROM outbox_messages ORDER BY id;
\set VERBOSITY terse
DROP EXTENSION outbox;
\set VERBOSITY default

-- abandoned events do not count: they were given up on
SELECT outbox_abandon(2);
\set VERBOSITY terse
DROP EXTENSION outbox;
\set VERBOSITY default

-- outbox_discard() abandons every undelivered event, whatever its state,
-- with the reason as its error; none is left to deliver
SELECT outbox_discard() AS discarded;
SELECT id, status, attempts, last_error FROM outbox_messages ORDER BY id;
SELECT outbox_discard() AS discarded_again;
SELECT pending, failed, abandoned FROM outbox_stats WHERE topic IS NULL;
DROP EXTENSION outbox;
SELECT extname FROM pg_extension WHERE extname = 'outbox';

-- DROP SCHEMA ... CASCADE of its schema
CREATE SCHEMA outbox_drop;
CREATE EXTENSION outbox SCHEMA outbox_drop;
SELECT outbox_drop.outbox_enqueue('drop.t', 'in a schema'::text);
DROP SCHEMA outbox_drop CASCADE;
\echo :LAST_ERROR_SQLSTATE
-- (without CASCADE, PostgreSQL refuses it as ever)
\set VERBOSITY terse
DROP SCHEMA outbox_drop;
\set VERBOSITY default
SELECT outbox_drop.outbox_discard() AS discarded;
DROP SCHEMA outbox_drop CASCADE;
SELECT extname FROM pg_extension WHERE extname = 'outbox';

-- DROP OWNED BY its owner (and CURRENT_USER, when that is the owner); not
-- by another role, which drops nothing of it
CREATE ROLE outbox_drop_owner SUPERUSER;
CREATE ROLE outbox_drop_other;
SET ROLE outbox_drop_owner;
CREATE EXTENSION outbox;
RESET ROLE;
SELECT outbox_enqueue('drop.t', 'owned'::text);
DROP OWNED BY outbox_drop_owner;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
DROP OWNED BY outbox_drop_other, outbox_drop_owner CASCADE;
SET ROLE outbox_drop_owner;
DROP OWNED BY CURRENT_USER;
RESET ROLE;
\set VERBOSITY default
DROP OWNED BY outbox_drop_other;
SELECT extname, extowner::regrole FROM pg_extension WHERE extname = 'outbox';
SELECT outbox_discard() AS discarded;
DROP OWNED BY outbox_drop_owner;
SELECT extname FROM pg_extension WHERE extname = 'outbox';
DROP ROLE outbox_drop_owner;
DROP ROLE outbox_drop_other;

-- what drops it only by cascade: the schema's owner, when that is not the
-- extension's
CREATE ROLE outbox_drop_schema_owner SUPERUSER;
CREATE SCHEMA outbox_drop AUTHORIZATION outbox_drop_schema_owner;
CREATE EXTENSION outbox SCHEMA outbox_drop;
SELECT outbox_drop.outbox_enqueue('drop.t', 'cascade'::text);
\set VERBOSITY terse
BEGIN;
DROP OWNED BY outbox_drop_schema_owner CASCADE;
ROLLBACK;
\set VERBOSITY default
SELECT extname FROM pg_extension WHERE extname = 'outbox';
SELECT outbox_drop.outbox_discard() AS discarded;
DROP OWNED BY outbox_drop_schema_owner CASCADE;
SELECT extname FROM pg_extension WHERE extname = 'outbox';
DROP ROLE outbox_drop_schema_owner;

-- what drops relations of the extension without dropping it is not
-- refused: REINDEX CONCURRENTLY, an index dropped by hand
CREATE EXTENSION outbox;
SELECT outbox_enqueue('drop.t', 'reindexed'::text);
REINDEX TABLE CONCURRENTLY outbox_log_0;
REINDEX TABLE CONCURRENTLY outbox_retries;
BEGIN;
DROP INDEX outbox_log_0_txid;
ROLLBACK;
SELECT count(*) AS undelivered FROM outbox_messages WHERE status = 'pending';
SELECT outbox_discard() AS discarded;
DROP EXTENSION outbox;

-- for the tests after this one
CREATE EXTENSION outbox;
