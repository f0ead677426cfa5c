/*-------------------------------------------------------------------------
 *
 * retention.c
 *		Remove what is past its retention: published and abandoned rows of
 *		the retry table, a thousand at a time; the log a table at a time, by
 *		TRUNCATE, its lock taken without waiting; statistics older than two
 *		hours, summed into one row per topic so that the totals only grow.
 *		docs/design.md, "Storage: a log that publishing does not rewrite",
 *		says why.
 *
 * src/queue/retention.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/guc.h"
#include "queue/claim.h"
#include "queue/reader.h"
#include "queue/retention.h"
#include "queue/retries.h"

/* how many rows of each kind one cleanup transaction removes */
#define PURGE_SQL_BATCH_SIZE 10000
/* how long a log table may stay locked by others before the log says so */
#define ROTATE_BLOCKED_WARN_MS 60000

/*
 * Statistics older than two hours summed into the row of bucket -infinity
 * of their topic.
 */
static OutboxPlan fold_plan = {
	"WITH old AS ("
	"  DELETE FROM %1$s.outbox_publish_stats s"
	"   WHERE s.bucket < now() - interval '2 hours' AND s.bucket > '-infinity'"
	"  RETURNING s.*"
	")"
	" INSERT INTO %1$s.outbox_publish_stats AS s"
	"        (topic, bucket, published, failed, abandoned, latency_ms_sum, latency_histogram)"
	" SELECT o.topic, '-infinity', sum(o.published), sum(o.failed), sum(o.abandoned),"
	"        sum(o.latency_ms_sum),"
	"        coalesce((SELECT array_agg(b.n ORDER BY b.i)"
	"                    FROM (SELECT h.i, sum(h.v)::bigint AS n"
	"                            FROM old p, unnest(p.latency_histogram) WITH ORDINALITY AS h(v, i)"
	"                           WHERE p.topic = o.topic GROUP BY h.i) b), '{}')"
	"   FROM old o GROUP BY o.topic"
	" ON CONFLICT (topic, bucket) DO UPDATE"
	"    SET published = s.published + excluded.published,"
	"        failed = s.failed + excluded.failed,"
	"        abandoned = s.abandoned + excluded.abandoned,"
	"        latency_ms_sum = s.latency_ms_sum + excluded.latency_ms_sum,"
	"        latency_histogram = (SELECT array_agg(coalesce(h.a, 0) + coalesce(h.b, 0) ORDER BY h.o)"
	"                               FROM unnest(s.latency_histogram, excluded.latency_histogram)"
	"                                    WITH ORDINALITY AS h(a, b, o))"
};

/* has a delivery of an id in [$1, $2] been recorded since $3 ago? */
static OutboxPlan recent_plan = {
	"SELECT EXISTS (SELECT FROM %1$s.outbox_ledger g"
	"                WHERE int8range(g.first_id, g.last_id, '[]') && int8range($1, $2, '[]')"
	"                  AND g.published_at >= now() - $3)",
	3, {INT8OID, INT8OID, INTERVALOID}
};

/*
 * Ledger rows of events before $1, no longer in the log, and caller-given
 * event ids of events before $2, in neither the log nor the retry table.
 */
static OutboxPlan forget_plan = {
	"WITH ledger AS (DELETE FROM %1$s.outbox_ledger g WHERE g.last_id < $1)"
	" DELETE FROM %1$s.outbox_event_ids e WHERE e.id < $2",
	2, {INT8OID, INT8OID}
};

/* since when the rotation could not lock each table, 0 if it could */
static TimestampTz blocked_since[OUTBOX_LOG_TABLES];

/* A setting in seconds, as an interval Datum. */
static Datum
interval_of(double seconds)
{
	return DirectFunctionCall7(make_interval, Int32GetDatum(0), Int32GetDatum(0),
							   Int32GetDatum(0), Int32GetDatum(0), Int32GetDatum(0),
							   Int32GetDatum(0), Float8GetDatum(seconds));
}

/*
 * Delete up to batch_size (an integer datum) published and as many
 * abandoned events past their retentions (interval datums), and fold the
 * statistics older than two hours; returns how many events were deleted.
 * Takes a connection to SPI.
 */
static int64
purge(const OutboxExtension *ext, Datum published_retention, Datum abandoned_retention,
	  Datum batch_size)
{
	int64		removed;

	SPI_connect();
	removed = outbox_retries_purge(ext, published_retention, abandoned_retention,
								   batch_size);
	outbox_run(ext, &fold_plan, NULL, -1);
	SPI_finish();
	return removed;
}

/*
 * Delete up to batch_size published and batch_size abandoned events past
 * their retention (the settings in force); returns how many were deleted.
 * Takes a connection to SPI.
 */
int64
outbox_purge_expired(const OutboxExtension *ext, int batch_size)
{
	outbox_lock_reader_table(ext, AccessShareLock);
	return purge(ext, interval_of(outbox_published_retention),
				 interval_of(outbox_abandoned_retention), Int32GetDatum(batch_size));
}

/* The name of log table t, schema-qualified. */
static char *
log_table_name(const OutboxExtension *ext, int t)
{
	char		name[NAMEDATALEN];

	snprintf(name, sizeof(name), "outbox_log_%d", t);
	return quote_qualified_identifier(get_namespace_name(ext->schema), name);
}

/*
 * Say, once, that log table t has been locked by others for a while:
 * nothing is lost, but it is not emptied meanwhile.
 */
static void
note_blocked(int t, bool blocked)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!blocked)
		blocked_since[t] = 0;
	else if (blocked_since[t] == 0)
		blocked_since[t] = now;
	else if (TimestampDifferenceExceeds(blocked_since[t], now, ROTATE_BLOCKED_WARN_MS))
	{
		ereport(LOG,
				(errmsg("log table outbox_log_%d has not been emptied for %d s: another session holds a lock on it",
						t, ROTATE_BLOCKED_WARN_MS / 1000),
				 errhint("pg_locks shows which session; the log grows until it lets go.")));
		blocked_since[t] = now;
	}
}

/*
 * May log table t, locked, be emptied: it holds events, every one of them
 * read and recorded (none of a transaction still to be drained), and the
 * last delivery among them past the retention?  *rows gets how many it
 * holds, unless rows is NULL (counting them reads the whole table).  The
 * caller is connected to SPI.
 */
static bool
may_empty(const OutboxExtension *ext, int t, OutboxReader *reader, Datum retention,
		  int64 *rows)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	int64		first_id;
	int64		last_id;
	bool		ok;

	ok = outbox_log_table_range(ext, t, snapshot, &first_id, &last_id) &&
		last_id <= reader->last_id &&
		!outbox_log_table_holds(ext, t, snapshot, reader->running, reader->nrunning) &&
		!outbox_log_table_holds(ext, t, snapshot, reader->draining, reader->ndraining);
	UnregisterSnapshot(snapshot);
	if (ok)
	{
		Datum		values[3] = {Int64GetDatum(first_id), Int64GetDatum(last_id), retention};
		bool		isnull;

		ok = !DatumGetBool(outbox_run_value(ext, &recent_plan, values, &isnull));
	}
	if (ok && rows != NULL)
	{
		char	   *count = psprintf("SELECT count(*) FROM %s", log_table_name(ext, t));

		if (SPI_execute(count, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "counting the rows of outbox_log_%d failed", t);
		*rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &ok));
		ok = true;
	}
	return ok;
}

/*
 * Rotate the log and empty the tables that may be (docs/design.md,
 * "Storage: a log that publishing does not rewrite"), with a retention of
 * published events of retention_s seconds; adds the events removed to
 * *removed (unless NULL), and returns the table enqueue writes to, or
 * -1 if another session holds the claim lock and wait is false.  Takes a
 * connection to SPI.
 */
int
outbox_rotate_log(const OutboxExtension *ext, double retention_s, bool wait,
				  int64 *removed)
{
	Datum		retention = interval_of(retention_s);
	OutboxReaderRow row;
	Snapshot	snapshot;
	int64		first_id;
	int64		last_id;
	int64		oldest = PG_INT64_MAX;
	int			next;

	SPI_connect();
	if (!outbox_lock_reader(ext, wait, &row))
	{
		SPI_finish();
		return -1;
	}
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		int64		rows;

		if (t == row.current_log)
			continue;
		if (!ConditionalLockRelationOid(outbox_relation(ext, psprintf("outbox_log_%d", t)),
										AccessExclusiveLock))
		{
			note_blocked(t, true);
			continue;
		}
		note_blocked(t, false);
		if (may_empty(ext, t, &row.reader, retention, removed ? &rows : NULL))
		{
			if (SPI_execute(psprintf("TRUNCATE %s", log_table_name(ext, t)), false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "emptying outbox_log_%d failed", t);
			if (removed != NULL)
				*removed += rows;
		}
	}

	/* what no longer describes a stored event */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
		if (outbox_log_table_range(ext, t, snapshot, &first_id, &last_id))
			oldest = Min(oldest, first_id);
	{
		Datum		values[2] = {Int64GetDatum(oldest),
		Int64GetDatum(Min(oldest, outbox_retries_first_id(ext)))};

		outbox_run(ext, &forget_plan, values, -1);
	}

	/* enqueue moves on once its table is old enough and the next is empty */
	next = (row.current_log + 1) % OUTBOX_LOG_TABLES;
	if (TimestampDifferenceExceeds(row.current_since, GetCurrentTimestamp(),
								   (long) (Max(retention_s / 2, 10) * 1000)) &&
		!outbox_log_table_range(ext, next, snapshot, &first_id, &last_id))
	{
		row.current_log = next;
		row.current_since = GetCurrentTransactionStartTimestamp();
		outbox_write_reader(ext, &row);
	}
	UnregisterSnapshot(snapshot);
	SPI_finish();
	return row.current_log;
}

PG_FUNCTION_INFO_V1(outbox_purge_batch);
PG_FUNCTION_INFO_V1(outbox_rotate);
PG_FUNCTION_INFO_V1(outbox_purge);

/*
 * outbox_purge_batch(published_retention interval,
 *					  abandoned_retention interval, batch_size integer)
 *		RETURNS bigint
 *
 * One batch of the retention cleanup of the retry table, with the given
 * retentions; returns how many events it removed.
 */
Datum
outbox_purge_batch(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);

	PG_RETURN_INT64(purge(ext, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)));
}

/*
 * outbox_rotate(published_retention interval) RETURNS bigint
 *
 * Rotate the log and empty what may be, with the given retention; returns
 * how many events it removed.
 */
Datum
outbox_rotate(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	double		retention_s = DatumGetFloat8(DirectFunctionCall2(interval_part,
																  CStringGetTextDatum("epoch"),
																  PG_GETARG_DATUM(0)));
	int64		removed = 0;

	outbox_require_read_committed("outbox_rotate()");
	outbox_rotate_log(ext, retention_s, true, &removed);
	PG_RETURN_INT64(removed);
}

/*
 * outbox_purge() RETURNS bigint
 *
 * The retention cleanup, now, with the settings in force: the retry table,
 * then the log; returns how many events it removed.
 */
Datum
outbox_purge(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	int64		removed = 0;
	int64		batch;

	outbox_require_read_committed("outbox_purge()");
	while ((batch = outbox_purge_expired(ext, PURGE_SQL_BATCH_SIZE)) > 0)
		removed += batch;
	outbox_rotate_log(ext, outbox_published_retention, true, &removed);
	PG_RETURN_INT64(removed);
}
