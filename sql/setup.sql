--
-- These tests drive the worker's state machine by hand: the worker of this
-- database, where the server runs one (make installcheck on a server that
-- preloads the library), stays off while they run.
--
DO $$
BEGIN
	EXECUTE pg_catalog.format('ALTER DATABASE %I SET outbox.enabled = off',
							  pg_catalog.current_database());
END
$$;
CREATE EXTENSION outbox;
SELECT extversion FROM pg_extension WHERE extname = 'outbox';
