/*-------------------------------------------------------------------------
 *
 * claim.c
 *		The SQL side of publishing: claim a batch of due events, record what
 *		became of them.
 *
 * A batch lives in one transaction: the claim locks the rows (FOR UPDATE
 * SKIP LOCKED) and the outcomes are recorded before commit.  A worker that
 * dies mid-batch loses its locks with its transaction, so its rows are due
 * again at once.  The state machine itself is SQL (outbox_claim,
 * outbox_mark_published, outbox_mark_failed in outbox--1.0.sql); this file
 * calls it with kept plans, one statement per batch and outcome.
 *
 * Every function here must be called inside a transaction with an active
 * snapshot, and not inside an SPI connection.
 *
 * src/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "outbox.h"

#define NUM_PLANS 8
#define CLAIM_PLAN 0
#define PUBLISHED_PLAN 1
#define FAILED_PLAN 2
#define PURGE_PLAN 3
#define DUE_PLAN 4
#define RELEASED_PLAN 5
#define ROTATE_PLAN 6
#define CURRENT_LOG_PLAN 7

/*
 * A batch's payloads are held three times at once (SPI's result, the
 * batch, librdkafka's copies): bound them.
 */
#define BATCH_MAX_BYTES (16 * 1024 * 1024)

/* kept plans, valid for the extension whose oid is plans_extension */
static SPIPlanPtr plans[NUM_PLANS];
static Oid	plans_extension = InvalidOid;

/*
 * The schema and the owner of the extension whose oid is given.
 */
static void
extension_schema_and_owner(Oid extension, Oid *schema, Oid *owner)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extension));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "extension with oid %u does not exist", extension);
	*schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	*owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * The role that owns the extension in this database, or InvalidOid if it
 * is not installed.  Reads the catalogs only, and runs no user code.
 */
Oid
outbox_extension_owner(void)
{
	Oid			extension = get_extension_oid("outbox", true);
	Oid			schema;
	Oid			owner;

	if (!OidIsValid(extension))
		return InvalidOid;
	extension_schema_and_owner(extension, &schema, &owner);
	return owner;
}

/*
 * Is the extension installed in this database, and owned by the current
 * user (the role the worker runs as)?  If so, make sure the kept plans
 * point into its schema.
 */
bool
outbox_extension_ready(void)
{
	Oid			extension = get_extension_oid("outbox", true);
	Oid			schema;
	Oid			owner;
	const char *schema_name;
	static const struct
	{
		const char *sql;
		int			nargs;
		Oid			argtypes[8];
	}			plan_sources[NUM_PLANS] = {
		{"SELECT * FROM %s.outbox_claim($1, $2)", 2, {INT4OID, INT8OID}},
		{"SELECT %s.outbox_mark_published($1, $2, $3, $4)", 4,
		{INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID, BOOLOID}},
		{"SELECT %s.outbox_mark_failed($1, $2, $3, $4, $5, $6, $7, $8)", 8,
		{INT8ARRAYOID, TEXTARRAYOID, BOOLARRAYOID, INT4OID, INTERVALOID, INTERVALOID, FLOAT8OID, TEXTOID}},
		{"SELECT %s.outbox_purge_batch($1, $2, $3)", 3,
		{INTERVALOID, INTERVALOID, INT4OID}},
		/*
		 * outbox_claim's test of due events, without its locks and sorts:
		 * events past last_id, transactions that ended since they were
		 * running, due events of the retry table
		 */
		{"SELECT FROM %1$s.outbox_reader r"
			" WHERE EXISTS (SELECT FROM %1$s.outbox_log l WHERE l.id > r.last_id)"
			" OR cardinality(r.draining) > 0"
			" OR EXISTS (SELECT FROM unnest(r.running) x"
			"            WHERE pg_visible_in_snapshot(x, pg_current_snapshot()))"
			" OR EXISTS (SELECT FROM %1$s.outbox_retries m"
			"            WHERE m.status IN ('pending', 'failed')"
			"            AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now()))", 0, {0}},
		{"SELECT %s.outbox_mark_released($1)", 1, {INT8ARRAYOID}},
		{"SELECT %s.outbox_rotate($1)", 1, {INTERVALOID}},
		{"SELECT current_log::bigint FROM %s.outbox_reader", 0, {0}},
	};

	if (!OidIsValid(extension))
		return false;
	extension_schema_and_owner(extension, &schema, &owner);
	if (owner != GetUserId())
		return false;
	if (extension == plans_extension)
		return true;

	schema_name = quote_identifier(get_namespace_name(schema));
	SPI_connect();
	for (int i = 0; i < NUM_PLANS; i++)
	{
		SPIPlanPtr	plan;

		plan = SPI_prepare(psprintf(plan_sources[i].sql, schema_name),
						   plan_sources[i].nargs,
						   (Oid *) plan_sources[i].argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		if (plans[i] != NULL)
			SPI_freeplan(plans[i]);
		plans[i] = plan;
	}
	SPI_finish();
	plans_extension = extension;
	return true;
}

/*
 * Copy a text datum out of SPI memory as UTF-8 (what Kafka clients
 * expect); NULL if it cannot be converted.
 */
static char *
utf8_copy(Datum d, int *len)
{
	text	   *t = DatumGetTextPP(d);

	return outbox_to_utf8(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), len);
}

/*
 * Copy one claimed row into ev.  An event that cannot go on the wire (a
 * row stored before enqueue checked the encoding) is refused for good
 * here, so that it fails alone instead of failing its batch.
 */
static void
copy_event(OutboxEvent *ev, HeapTuple tuple, TupleDesc tupdesc)
{
	bool		isnull;
	bool		not_utf8;
	Datum		d;
	int			len;
	const char *problem = NULL;

	ev->outcome = OUTBOX_IN_FLIGHT;
	ev->id = DatumGetInt64(SPI_getbinval(tuple, tupdesc, 1, &isnull));
	d = SPI_getbinval(tuple, tupdesc, 2, &isnull);
	strlcpy(ev->event_id,
			DatumGetCString(DirectFunctionCall1(uuid_out, d)),
			sizeof(ev->event_id));
	ev->topic = utf8_copy(SPI_getbinval(tuple, tupdesc, 3, &isnull), &len);
	d = SPI_getbinval(tuple, tupdesc, 4, &isnull);
	if (!isnull && (ev->key = utf8_copy(d, &ev->key_len)) == NULL)
		problem = "The key cannot be converted to UTF-8.";
	d = SPI_getbinval(tuple, tupdesc, 5, &isnull);
	if (!isnull)
	{
		bytea	   *payload = DatumGetByteaPP(d);

		ev->payload_len = VARSIZE_ANY_EXHDR(payload);
		ev->payload = palloc(ev->payload_len);
		memcpy(ev->payload, VARDATA_ANY(payload), ev->payload_len);
	}
	d = SPI_getbinval(tuple, tupdesc, 6, &isnull);
	if (!isnull && problem == NULL)
		problem = outbox_unpack_headers(DatumGetJsonbP(d), ev, &not_utf8);
	if (ev->topic == NULL)
		problem = "The topic cannot be converted to UTF-8.";

	if (problem != NULL)
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = problem;
		ev->permanent = true;
	}
}

/*
 * Claim up to batch_size due events, of about BATCH_MAX_BYTES at most, and
 * lock them for this transaction.  The batch is allocated in the caller's
 * memory context.
 */
OutboxBatch *
outbox_claim_batch(int batch_size)
{
	MemoryContext batch_cxt = CurrentMemoryContext;
	OutboxBatch *batch = palloc0(sizeof(OutboxBatch));
	Datum		args[2];
	int			ret;

	args[0] = Int32GetDatum(batch_size);
	args[1] = Int64GetDatum(BATCH_MAX_BYTES);
	SPI_connect();
	ret = SPI_execute_plan(plans[CLAIM_PLAN], args, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "outbox_claim failed: %s", SPI_result_code_string(ret));

	MemoryContextSwitchTo(batch_cxt);
	batch->count = SPI_processed;
	batch->events = palloc0(Max(batch->count, 1) * sizeof(OutboxEvent));
	for (int i = 0; i < batch->count; i++)
		copy_event(&batch->events[i], SPI_tuptable->vals[i], SPI_tuptable->tupdesc);
	SPI_finish();
	return batch;
}

/*
 * Run one of the kept plans that return one bigint; returns it.
 */
static int64
run_count_plan(int which, Datum *values)
{
	int			ret = SPI_execute_plan(plans[which], values, NULL, false, 0);
	bool		isnull;

	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* A setting in milliseconds or seconds, as an interval Datum. */
static Datum
interval_datum(double seconds)
{
	return DirectFunctionCall7(make_interval, 0, 0, 0, 0, 0, 0, Float8GetDatum(seconds));
}

/*
 * Record the outcome of each event of the batch: delivered ones become
 * published, refused ones failed or abandoned, released ones are due
 * again with no attempt counted.
 */
void
outbox_record_outcomes(OutboxBatch *batch)
{
	int			n = batch->count;
	Datum	   *pub_ids = palloc(n * sizeof(Datum));
	Datum	   *pub_partitions = palloc(n * sizeof(Datum));
	Datum	   *pub_offsets = palloc(n * sizeof(Datum));
	Datum	   *fail_ids = palloc(n * sizeof(Datum));
	Datum	   *fail_errors = palloc(n * sizeof(Datum));
	Datum	   *fail_permanent = palloc(n * sizeof(Datum));
	Datum	   *released_ids = palloc(n * sizeof(Datum));
	int			npub = 0;
	int			nfail = 0;
	int			nreleased = 0;

	for (int i = 0; i < n; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (ev->outcome == OUTBOX_DELIVERED)
		{
			pub_ids[npub] = Int64GetDatum(ev->id);
			pub_partitions[npub] = Int32GetDatum(ev->partition);
			pub_offsets[npub] = Int64GetDatum(ev->offset);
			npub++;
		}
		else if (ev->outcome == OUTBOX_REFUSED)
		{
			fail_ids[nfail] = Int64GetDatum(ev->id);
			fail_errors[nfail] = CStringGetTextDatum(ev->error);
			fail_permanent[nfail] = BoolGetDatum(ev->permanent);
			nfail++;
		}
		else
			released_ids[nreleased++] = Int64GetDatum(ev->id);
	}

	SPI_connect();
	if (npub > 0)
	{
		Datum		values[4];

		values[0] = PointerGetDatum(construct_array(pub_ids, npub, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[1] = PointerGetDatum(construct_array(pub_partitions, npub, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = PointerGetDatum(construct_array(pub_offsets, npub, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[3] = BoolGetDatum(outbox_published_retention != 0);
		run_count_plan(PUBLISHED_PLAN, values);
	}
	if (nfail > 0)
	{
		Datum		values[8];

		values[0] = PointerGetDatum(construct_array(fail_ids, nfail, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[1] = PointerGetDatum(construct_array(fail_errors, nfail, TEXTOID, -1, false, TYPALIGN_INT));
		values[2] = PointerGetDatum(construct_array(fail_permanent, nfail, BOOLOID, 1, true, TYPALIGN_CHAR));
		values[3] = Int32GetDatum(outbox_max_attempts);
		values[4] = interval_datum(outbox_retry_base_delay / 1000.0);
		values[5] = interval_datum(outbox_retry_max_delay / 1000.0);
		values[6] = Float8GetDatum(outbox_retry_jitter);
		values[7] = CStringGetTextDatum(outbox_dead_letter_topic);
		run_count_plan(FAILED_PLAN, values);
	}
	if (nreleased > 0)
	{
		Datum		values[1];

		values[0] = PointerGetDatum(construct_array(released_ids, nreleased, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		run_count_plan(RELEASED_PLAN, values);
	}
	SPI_finish();
}

/*
 * Delete up to batch_size published and batch_size abandoned events past
 * their retention; returns how many were deleted.
 */
int64
outbox_purge_expired(int batch_size)
{
	Datum		values[3];
	int64		removed;

	values[0] = interval_datum(outbox_published_retention);
	values[1] = interval_datum(outbox_abandoned_retention);
	values[2] = Int32GetDatum(batch_size);
	SPI_connect();
	removed = run_count_plan(PURGE_PLAN, values);
	SPI_finish();
	return removed;
}

/*
 * Rotate and empty the log tables (outbox_rotate); returns the table that
 * outbox_enqueue should write to.
 */
int
outbox_rotate_log(void)
{
	Datum		values[1];
	int			current_log;

	values[0] = interval_datum(outbox_published_retention);
	SPI_connect();
	run_count_plan(ROTATE_PLAN, values);
	current_log = (int) run_count_plan(CURRENT_LOG_PLAN, NULL);
	SPI_finish();
	return current_log;
}

/*
 * Is any event due?  Far cheaper than a claim that finds nothing: what an
 * idle worker runs every outbox.poll_interval.
 */
bool
outbox_events_due(void)
{
	int			ret;
	bool		due;

	SPI_connect();
	ret = SPI_execute_plan(plans[DUE_PLAN], NULL, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	due = SPI_processed > 0;
	SPI_finish();
	return due;
}
