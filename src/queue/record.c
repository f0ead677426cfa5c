/*-------------------------------------------------------------------------
 *
 * record.c
 *		Record what became of claimed events, in the transaction that
 *		claimed them: a ledger row for the delivered events of the log, the
 *		retry table for the rest, attempts and backoff, the dead-letter
 *		copy; in a later transaction, the late reports of events handed off,
 *		on the rows still as their hand-off left them; the statistics summed
 *		in memory (stats.c); and the SQL outbox_mark_* functions, with the
 *		same code.  docs/design.md, "The path of an event" and "Producers
 *		per cluster", says why.
 *
 * src/queue/record.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/guc.h"
#include "queue/reader.h"
#include "queue/record.h"
#include "queue/retries.h"
#include "queue/stats.h"

/* deliveries of the log's events: their ledger row ($1 ids, $2 partitions, $3 offsets) */
static OutboxPlan ledger_plan = {
	"INSERT INTO %1$s.outbox_ledger (first_id, last_id, ids, partitions, offsets, published_at)"
	" VALUES ($1[1], $1[cardinality($1)], $1, $2, $3, clock_timestamp())",
	3, {INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID}
};

/* version 1.1: $1 fewer log events left to record, as its reader row counts */
static OutboxPlan recorded_plan_1_1 = {
	"UPDATE %1$s.outbox_reader SET unrecorded = GREATEST(unrecorded - $1, 0)",
	1, {INT8OID}
};

/* Arrays of one column of values per event, built up for one statement. */
typedef struct Column
{
	int			n;
	Datum	   *values;
} Column;

static void
column_init(Column *c, int size)
{
	c->n = 0;
	c->values = palloc((size + 1) * sizeof(Datum));
}

static void
column_add(Column *c, Datum value)
{
	c->values[c->n++] = value;
}

static Datum
column_array(Column *c, Oid type)
{
	return outbox_array(c->values, NULL, c->n, type);
}

/*
 * Record the deliveries of a batch, and count them in stats.
 */
static void
record_delivered(const OutboxExtension *ext, OutboxBatch *batch, bool keep,
				 HTAB *stats)
{
	TimestampTz now = GetCurrentTimestamp();
	Column		ids[2],
				partitions[2],
				offsets[2];
	Datum		values[3];

	for (int from_log = 0; from_log < 2; from_log++)
	{
		column_init(&ids[from_log], batch->count);
		column_init(&partitions[from_log], batch->count);
		column_init(&offsets[from_log], batch->count);
	}
	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (ev->outcome != OUTBOX_DELIVERED)
			continue;
		column_add(&ids[ev->from_log], Int64GetDatum(ev->id));
		column_add(&partitions[ev->from_log], Int32GetDatum(ev->partition));
		column_add(&offsets[ev->from_log], Int64GetDatum(ev->offset));
		outbox_stats_add(stats, ev->values[LOG_TOPIC], OUTBOX_STATS_PUBLISHED,
						 ev->created_at, now);
	}
	if (keep && ids[1].n > 0)
	{
		values[0] = column_array(&ids[1], INT8OID);
		values[1] = column_array(&partitions[1], INT4OID);
		values[2] = column_array(&offsets[1], INT8OID);
		outbox_run(ext, &ledger_plan, values, 1);
	}
	if (ids[0].n > 0)
		outbox_retries_published(ext, column_array(&ids[0], INT8OID),
								 column_array(&partitions[0], INT4OID),
								 column_array(&offsets[0], INT8OID), keep);
}

/*
 * The delay before the attempt that follows attempts refused ones:
 * base * 2^(attempts - 1), capped at max, spread by +/- jitter.
 */
static double
retry_delay_ms(int attempts, double base_ms, double max_ms, double jitter)
{
	double		delay = Min(base_ms * pow(2.0, Min(Max(attempts - 1, 0), 60)), max_ms);

	return delay * (1.0 + jitter * (2.0 * pg_prng_double(&pg_global_prng_state) - 1.0));
}

/*
 * Record the refused attempts of a batch, whose events are all in the
 * retry table by now: each is charged an attempt and waits for its retry,
 * or is abandoned after the last attempt or an error that retrying cannot
 * fix, and then copied to the dead-letter topic.
 */
static void
record_refused(const OutboxExtension *ext, OutboxBatch *batch,
			   const OutboxRetryPolicy *policy, HTAB *stats)
{
	TimestampTz now = GetCurrentTimestamp();
	Column		ids,
				errors,
				abandoned_flags,
				next_attempts,
				abandoned_ids;
	int32	   *attempts;
	int			charged = 0;

	column_init(&ids, batch->count);
	column_init(&errors, batch->count);
	for (int i = 0; i < batch->count; i++)
		if (batch->events[i].outcome == OUTBOX_REFUSED)
		{
			column_add(&ids, Int64GetDatum(batch->events[i].id));
			column_add(&errors, CStringGetTextDatum(batch->events[i].error));
		}
	if (ids.n == 0)
		return;

	/* the attempts each event has had now, in the order of ids */
	attempts = outbox_retries_charge(ext, column_array(&ids, INT8OID),
									 column_array(&errors, TEXTOID), ids.n);

	column_init(&abandoned_flags, ids.n);
	column_init(&next_attempts, ids.n);
	column_init(&abandoned_ids, ids.n);
	ids.n = 0;
	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];
		int32		tried;
		bool		abandon;

		if (ev->outcome != OUTBOX_REFUSED || (tried = attempts[charged++]) == 0)
			continue;
		abandon = ev->permanent || tried >= policy->max_attempts;
		column_add(&ids, Int64GetDatum(ev->id));
		column_add(&abandoned_flags, BoolGetDatum(abandon));
		column_add(&next_attempts,
				   TimestampTzGetDatum(now + (int64) (1000.0 *
													  retry_delay_ms(tried, policy->base_delay_ms,
																	 policy->max_delay_ms,
																	 policy->jitter))));
		if (abandon)
			column_add(&abandoned_ids, Int64GetDatum(ev->id));
		outbox_stats_add(stats, ev->values[LOG_TOPIC],
						 abandon ? OUTBOX_STATS_ABANDONED : OUTBOX_STATS_FAILED,
						 ev->created_at, now);
	}

	outbox_retries_refused(ext, column_array(&ids, INT8OID),
						   column_array(&abandoned_flags, BOOLOID),
						   column_array(&next_attempts, TIMESTAMPTZOID));
	outbox_retries_dead_letters(ext, column_array(&abandoned_ids, INT8OID),
								policy->dead_letter_topic);
}

/*
 * Record that the events of a batch handed off, all in the retry table by
 * now, are due again when their hand-off said.
 */
static void
record_handed_off(const OutboxExtension *ext, OutboxBatch *batch)
{
	Column		ids,
				dues;

	column_init(&ids, batch->count);
	column_init(&dues, batch->count);
	for (int i = 0; i < batch->count; i++)
		if (batch->events[i].outcome == OUTBOX_HANDED_OFF)
		{
			column_add(&ids, Int64GetDatum(batch->events[i].id));
			column_add(&dues, TimestampTzGetDatum(batch->events[i].due_at));
		}
	if (ids.n > 0)
		outbox_retries_handed_off(ext, column_array(&ids, INT8OID),
								  column_array(&dues, TIMESTAMPTZOID));
}

/*
 * The retry policy of the settings in force.
 */
OutboxRetryPolicy
outbox_retry_policy(void)
{
	OutboxRetryPolicy policy;

	policy.max_attempts = outbox_max_attempts;
	policy.base_delay_ms = outbox_retry_base_delay;
	policy.max_delay_ms = outbox_retry_max_delay;
	policy.jitter = outbox_retry_jitter;
	policy.dead_letter_topic = outbox_dead_letter_topic;
	return policy;
}

/*
 * Record the outcome of each event of the batch (docs/design.md, "The path
 * of an event"),
 * and count them in stats; with keep false (outbox.published_retention =
 * 0) delivered events are not kept.  Takes a connection to SPI; the batch
 * must have been claimed in this transaction, or its events locked
 * otherwise.
 */
void
outbox_record_outcomes(const OutboxExtension *ext, OutboxBatch *batch, bool keep,
					   const OutboxRetryPolicy *policy, HTAB *stats)
{
	OutboxEvent **unsent = palloc((batch->count + 1) * sizeof(OutboxEvent *));
	int			nunsent = 0;
	int			log_events = 0;

	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (!ev->from_log)
			continue;
		log_events++;
		if (ev->outcome != OUTBOX_DELIVERED)
			unsent[nunsent++] = ev;
	}

	outbox_lock_reader_table(ext, AccessShareLock);
	SPI_connect();
	outbox_retries_copy(ext, unsent, nunsent);
	record_delivered(ext, batch, keep, stats);
	record_refused(ext, batch, policy, stats);
	record_handed_off(ext, batch);
	if (ext->version < OUTBOX_VERSION(1, 2))
	{
		Datum		values[1] = {Int64GetDatum(log_events)};

		if (log_events > 0)
			outbox_run(ext, &recorded_plan_1_1, values, 1);
	}
	else
		outbox_count_unrecorded(-log_events);
	SPI_finish();
}

/*
 * Record the outcomes of a batch for a SQL function, and write their
 * statistics at once.
 */
static void
record_for_sql(const OutboxExtension *ext, OutboxBatch *batch, bool keep,
			   const OutboxRetryPolicy *policy)
{
	HTAB	   *stats = outbox_stats_create(CurrentMemoryContext);

	outbox_record_outcomes(ext, batch, keep, policy, stats);
	outbox_stats_write(ext, stats);
}

static int
id_cmp(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

static int
event_id_cmp(const void *a, const void *b)
{
	int64		x = ((const OutboxEvent *) a)->id;
	int64		y = ((const OutboxEvent *) b)->id;

	return (x > y) - (x < y);
}

/*
 * The events of the given ids (a bigint[] datum) as a batch, sorted by
 * id: those that outbox_claim() returned in this transaction as it
 * returned them, the others of the retry table locked, then the others of
 * the log.  The caller is connected to SPI; the batch is allocated in
 * memory context cxt.
 */
static OutboxBatch *
fetch_batch(const OutboxExtension *ext, Datum ids, MemoryContext cxt)
{
	ArrayType  *array = DatumGetArrayTypeP(ids);
	OutboxBatch *batch = MemoryContextAllocZero(cxt, sizeof(OutboxBatch));
	Datum	   *elems;
	Datum	   *rest;
	Datum	   *left;
	int			nids;
	int			nrest = 0;
	int			nleft = 0;
	int			r = 0;
	OutboxEvent *log_events;
	int			nretried;
	int			nlog;
	MemoryContext spi_cxt;

	if (ARR_NDIM(array) > 1 || array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ids must be a one-dimensional array without nulls")));
	deconstruct_array(array, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, NULL, &nids);
	batch->events = MemoryContextAlloc(cxt, (nids + 1) * sizeof(OutboxEvent));
	rest = palloc((nids + 1) * sizeof(Datum));
	left = palloc((nids + 1) * sizeof(Datum));
	for (int i = 0; i < nids; i++)
	{
		OutboxEvent *claimed = outbox_claimed_event(DatumGetInt64(elems[i]), true);

		if (claimed != NULL)
			batch->events[batch->count++] = *claimed;
		else
			rest[nrest++] = elems[i];
	}
	qsort(rest, nrest, sizeof(Datum), id_cmp);

	nretried = nrest == 0 ? 0 :
		outbox_retries_fetch(ext, outbox_array(rest, NULL, nrest, INT8OID),
							 batch->events + batch->count, cxt);
	for (int i = 0; i < nretried; i++)
	{
		OutboxEvent *ev = &batch->events[batch->count++];

		/* the retry table's rows come in id order, as rest is sorted */
		while (r < nrest && DatumGetInt64(rest[r]) < ev->id)
			left[nleft++] = rest[r++];
		if (r < nrest && DatumGetInt64(rest[r]) == ev->id)
			r++;
	}
	while (r < nrest)
		left[nleft++] = rest[r++];

	/* the ids in neither are looked for in the log */
	spi_cxt = MemoryContextSwitchTo(cxt);
	nlog = outbox_log_events(ext, outbox_array(left, NULL, nleft, INT8OID), &log_events);
	memcpy(batch->events + batch->count, log_events, nlog * sizeof(OutboxEvent));
	batch->count += nlog;
	MemoryContextSwitchTo(spi_cxt);
	qsort(batch->events, batch->count, sizeof(OutboxEvent), event_id_cmp);
	return batch;
}

/* The event of batch (sorted by id) with the given id, or NULL. */
static OutboxEvent *
event_of(OutboxBatch *batch, int64 id)
{
	OutboxEvent key;

	key.id = id;
	return bsearch(&key, batch->events, batch->count, sizeof(OutboxEvent), event_id_cmp);
}

/*
 * Record what the late reports of events handed off said (batch, from
 * outbox_kafka_late_reports(): events of the retry table, each with the
 * due_at of its hand-off), as for any batch, but only for the events still
 * as their hand-off left them: a report never overwrites what an operator
 * decided meanwhile (outbox_abandon(), outbox_retry(), outbox_discard()),
 * nor what a later attempt did, nor waits for a session that holds one
 * locked.  The others are left as they are: due again when their hand-off
 * said.  Takes a connection to SPI.
 */
void
outbox_record_late(const OutboxExtension *ext, OutboxBatch *batch, bool keep,
				   const OutboxRetryPolicy *policy, HTAB *stats)
{
	Column		ids,
				dues;
	bool	   *still;

	qsort(batch->events, batch->count, sizeof(OutboxEvent), event_id_cmp);
	column_init(&ids, batch->count);
	column_init(&dues, batch->count);
	for (int i = 0; i < batch->count; i++)
	{
		column_add(&ids, Int64GetDatum(batch->events[i].id));
		column_add(&dues, TimestampTzGetDatum(batch->events[i].due_at));
	}

	outbox_lock_reader_table(ext, AccessShareLock);
	SPI_connect();
	still = outbox_retries_still_handed_off(ext, column_array(&ids, INT8OID),
											column_array(&dues, TIMESTAMPTZOID),
											batch->count);
	for (int i = 0; i < batch->count; i++)
		if (!still[i])
			batch->events[i].outcome = OUTBOX_RELEASED;
	SPI_finish();
	outbox_record_outcomes(ext, batch, keep, policy, stats);
}

/* The n values of a one-dimensional array argument of a built-in type. */
static Datum *
array_arg(FunctionCallInfo fcinfo, int argno, Oid type, int n, const char *name)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *values;
	bool	   *nulls;
	int			count;

	get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
	deconstruct_array(array, type, typlen, typbyval, typalign, &values, &nulls, &count);
	if (ARR_NDIM(array) > 1 || count != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array with one element per id", name)));
	for (int i = 0; i < count; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain nulls", name)));
	return values;
}

/* The number of ids of a bigint[] argument. */
static int
id_count(FunctionCallInfo fcinfo)
{
	ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(0);

	return ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
}

/* A setting given as an interval, in milliseconds. */
static double
interval_ms(Datum interval)
{
	return 1000.0 * DatumGetFloat8(DirectFunctionCall2(interval_part,
													   CStringGetTextDatum("epoch"),
													   interval));
}

/*
 * The events of the ids given to a SQL function (argument 0), found and
 * locked, as a batch; *ids and *nids get the ids as given.
 */
static OutboxBatch *
batch_of_ids(FunctionCallInfo fcinfo, const OutboxExtension *ext, Datum **ids, int *nids)
{
	MemoryContext cxt = CurrentMemoryContext;
	OutboxBatch *batch;

	outbox_require_read_committed(get_func_name(fcinfo->flinfo->fn_oid));
	*nids = id_count(fcinfo);
	*ids = array_arg(fcinfo, 0, INT8OID, *nids, "ids");
	SPI_connect();
	batch = fetch_batch(ext, PG_GETARG_DATUM(0), cxt);
	SPI_finish();
	return batch;
}

PG_FUNCTION_INFO_V1(outbox_mark_published);
PG_FUNCTION_INFO_V1(outbox_mark_failed);
PG_FUNCTION_INFO_V1(outbox_mark_released);
PG_FUNCTION_INFO_V1(outbox_retry_delay);

/*
 * outbox_mark_published(ids bigint[], partitions integer[],
 *						 offsets bigint[], keep boolean) RETURNS bigint
 *
 * Record deliveries: one ledger row for the log's events (none unless
 * keep), the retry table's published (deleted unless keep).  Returns how
 * many events it found.
 */
Datum
outbox_mark_published(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Datum	   *ids;
	int			nids;
	OutboxBatch *batch = batch_of_ids(fcinfo, ext, &ids, &nids);
	Datum	   *partitions = array_arg(fcinfo, 1, INT4OID, nids, "partitions");
	Datum	   *offsets = array_arg(fcinfo, 2, INT8OID, nids, "offsets");

	for (int i = 0; i < nids; i++)
	{
		OutboxEvent *ev = event_of(batch, DatumGetInt64(ids[i]));

		if (ev == NULL)
			continue;
		ev->outcome = OUTBOX_DELIVERED;
		ev->partition = DatumGetInt32(partitions[i]);
		ev->offset = DatumGetInt64(offsets[i]);
	}
	record_for_sql(ext, batch, PG_GETARG_BOOL(3), NULL);
	PG_RETURN_INT64(batch->count);
}

/*
 * outbox_mark_failed(ids bigint[], errors text[], permanent boolean[],
 *					  max_attempts integer, base_delay interval,
 *					  max_delay interval, jitter double precision,
 *					  dead_letter_topic text) RETURNS bigint
 *
 * Record refused deliveries (see record_refused).  Returns how many events
 * it found.
 */
Datum
outbox_mark_failed(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Datum	   *ids;
	int			nids;
	OutboxBatch *batch = batch_of_ids(fcinfo, ext, &ids, &nids);
	Datum	   *errors = array_arg(fcinfo, 1, TEXTOID, nids, "errors");
	Datum	   *permanent = array_arg(fcinfo, 2, BOOLOID, nids, "permanent");
	OutboxRetryPolicy policy;

	policy.max_attempts = PG_GETARG_INT32(3);
	policy.base_delay_ms = interval_ms(PG_GETARG_DATUM(4));
	policy.max_delay_ms = interval_ms(PG_GETARG_DATUM(5));
	policy.jitter = PG_GETARG_FLOAT8(6);
	policy.dead_letter_topic = PG_ARGISNULL(7) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(7));
	for (int i = 0; i < nids; i++)
	{
		OutboxEvent *ev = event_of(batch, DatumGetInt64(ids[i]));

		if (ev == NULL)
			continue;
		ev->outcome = OUTBOX_REFUSED;
		ev->error = TextDatumGetCString(errors[i]);
		ev->permanent = DatumGetBool(permanent[i]);
	}
	record_for_sql(ext, batch, true, &policy);
	PG_RETURN_INT64(batch->count);
}

/*
 * outbox_mark_released(ids bigint[]) RETURNS bigint
 *
 * Record claimed events that were not sent: due again, with no attempt
 * charged.  Returns how many ids it was given.
 */
Datum
outbox_mark_released(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Datum	   *ids;
	int			nids;
	OutboxBatch *batch = batch_of_ids(fcinfo, ext, &ids, &nids);

	for (int i = 0; i < batch->count; i++)
		batch->events[i].outcome = OUTBOX_RELEASED;
	record_for_sql(ext, batch, true, NULL);
	PG_RETURN_INT64(nids);
}

/*
 * outbox_retry_delay(attempts integer, base_delay interval,
 *					  max_delay interval, jitter double precision)
 *		RETURNS interval
 *
 * The delay before the attempt after attempts refused ones.
 */
Datum
outbox_retry_delay(PG_FUNCTION_ARGS)
{
	double		ms;

	outbox_entry(fcinfo);
	ms = retry_delay_ms(PG_GETARG_INT32(0), interval_ms(PG_GETARG_DATUM(1)),
						interval_ms(PG_GETARG_DATUM(2)), PG_GETARG_FLOAT8(3));
	PG_RETURN_DATUM(DirectFunctionCall7(make_interval, Int32GetDatum(0), Int32GetDatum(0),
										Int32GetDatum(0), Int32GetDatum(0),
										Int32GetDatum(0), Int32GetDatum(0),
										Float8GetDatum(ms / 1000.0)));
}
