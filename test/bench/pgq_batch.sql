-- PgQ's batch read of 1000 events, the baseline of the worker's SQL: the
-- next batch, its events, the batch finished.
BEGIN;
SELECT pgq.next_batch('bench', 'bench') AS batch_id \gset
SELECT count(*) FROM pgq.get_batch_events(:batch_id);
SELECT pgq.finish_batch(:batch_id);
END;
