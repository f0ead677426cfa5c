/*-------------------------------------------------------------------------
 *
 * claim.c
 *		The SQL side of publishing: claim a batch of due events, record what
 *		became of them.
 *
 * A batch lives in one transaction: the claim locks the rows of the retry
 * table it takes (FOR UPDATE SKIP LOCKED), moves the reader's cursor past
 * the log events it takes, and the outcomes are recorded before commit.  A
 * worker that dies mid-batch loses its locks and its cursor move with its
 * transaction, so its events are due again at once.  The claim is here
 * (outbox_claim() is the same code): its log part reads the log with index
 * scans (reader.c), the rest are kept plans, a few statements per batch.
 * The outcomes are SQL functions (outbox_mark_published, outbox_mark_failed,
 * outbox_mark_released in the extension scripts), called with kept plans,
 * one statement per batch and outcome.
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
#include "funcapi.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "outbox.h"

#define NUM_PLANS 14
#define PUBLISHED_PLAN 0
#define FAILED_PLAN 1
#define PURGE_PLAN 2
#define DUE_PLAN 3
#define RELEASED_PLAN 4
#define ROTATE_PLAN 5
#define CURRENT_LOG_PLAN 6
#define LOCK_PLAN 7
#define READER_PLAN 8
#define RETRIES_PLAN 9
#define HELD_PLAN 10
#define COPY_PLAN 11
#define SAVE_PLAN 12
#define LOGGED_PLAN 13

/*
 * A batch's payloads are held three times at once (the claimed rows, the
 * batch, librdkafka's copies): bound them.
 */
#define BATCH_MAX_BYTES (16 * 1024 * 1024)

/* kept plans, valid for the extension whose oid is plans_extension */
static SPIPlanPtr plans[NUM_PLANS];
static Oid	plans_extension = InvalidOid;
static Oid	plans_schema = InvalidOid;

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
 * Make sure the kept plans point into the schema of extension, whose
 * schema is schema.
 */
static void
prepare_plans(Oid extension, Oid schema)
{
	const char *schema_name;
	static const struct
	{
		const char *sql;
		int			nargs;
		Oid			argtypes[8];
	}			plan_sources[NUM_PLANS] = {
		{"SELECT %s.outbox_mark_published($1, $2, $3, $4)", 4,
		{INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID, BOOLOID}},
		{"SELECT %s.outbox_mark_failed($1, $2, $3, $4, $5, $6, $7, $8)", 8,
		{INT8ARRAYOID, TEXTARRAYOID, BOOLARRAYOID, INT4OID, INTERVALOID, INTERVALOID, FLOAT8OID, TEXTOID}},
		{"SELECT %s.outbox_purge_batch($1, $2, $3)", 3,
		{INTERVALOID, INTERVALOID, INT4OID}},
		/*
		 * the claim's test of due events but for the log past last_id:
		 * transactions that ended since they were running, due events of
		 * the retry table
		 */
		{"SELECT r.last_id, cardinality(r.draining) > 0"
			" OR EXISTS (SELECT FROM unnest(r.running) x"
			"            WHERE pg_visible_in_snapshot(x, pg_current_snapshot()))"
			" OR EXISTS (SELECT FROM %1$s.outbox_retries m"
			"            WHERE m.status IN ('pending', 'failed')"
			"            AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now()))"
			" FROM %1$s.outbox_reader r", 0, {0}},
		{"SELECT %s.outbox_mark_released($1)", 1, {INT8ARRAYOID}},
		{"SELECT %s.outbox_rotate($1)", 1, {INTERVALOID}},
		{"SELECT current_log::bigint FROM %s.outbox_reader", 0, {0}},
		{"SELECT %s.outbox_lock_reader(false)", 0, {0}},
		{"SELECT last_id, running, draining, drain_upto, drain_after FROM %s.outbox_reader",
		0, {0}},
		/*
		 * the due events of the retry table, as the columns of the log: each
		 * only if every earlier unfinished event of its key is claimed with
		 * it
		 */
		{"WITH claimed AS MATERIALIZED ("
			"  SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers, m.created_at"
			"    FROM %1$s.outbox_retries m"
			"   WHERE m.status IN ('pending', 'failed')"
			"     AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())"
			"   ORDER BY m.id LIMIT $1"
			"     FOR UPDATE OF m SKIP LOCKED"
			"), held_back AS ("
			"  SELECT h.topic, h.key, min(h.id) AS first_id"
			"    FROM %1$s.outbox_retries h"
			"   WHERE h.status IN ('pending', 'failed') AND h.key IS NOT NULL"
			"     AND h.id < (SELECT max(c.id) FROM claimed c)"
			"     AND NOT EXISTS (SELECT FROM claimed c WHERE c.id = h.id)"
			"   GROUP BY h.topic, h.key"
			")"
			" SELECT c.id, NULL::xid8, c.event_id, c.topic, c.key, c.payload, c.headers,"
			"        c.created_at"
			"   FROM claimed c"
			"  WHERE NOT EXISTS (SELECT FROM held_back h"
			"                     WHERE h.topic = c.topic AND h.key = c.key AND h.first_id < c.id)"
			"  ORDER BY c.id", 1, {INT4OID}},
		/*
		 * of log events ($1 ids, $2 topics, $3 keys; ids from $4 to $5),
		 * those in the retry table already (recorded after a failed batch),
		 * and those whose key has an unfinished event there: by position,
		 * and whether it is there.  Nothing is looked up per event while
		 * the retry table has neither.
		 */
		{"SELECT u.i::integer, EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id = u.id)"
			"  FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS u(id, topic, key, i)"
			" WHERE (EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id BETWEEN $4 AND $5)"
			"        OR EXISTS (SELECT FROM %1$s.outbox_retries h"
			"                    WHERE h.status IN ('pending', 'failed') AND h.key IS NOT NULL))"
			"   AND (EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id = u.id)"
			"        OR (u.key IS NOT NULL"
			"            AND EXISTS (SELECT FROM %1$s.outbox_retries h"
			"                         WHERE h.topic = u.topic AND h.key = u.key"
			"                           AND h.status IN ('pending', 'failed'))))", 5,
		{INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID, INT8OID}},
		{"SELECT %s.outbox_copy_to_retries($1)", 1, {INT8ARRAYOID}},
		{"UPDATE %s.outbox_reader SET last_id = $1, running = $2, draining = $3,"
			" drain_upto = $4, drain_after = $5, unrecorded = unrecorded + $6", 6,
		{INT8OID, XID8ARRAYOID, XID8ARRAYOID, INT8OID, INT8OID, INT8OID}},
		{"SELECT %s.outbox_mark_logged($1, $2, $3, $4, $5, $6)", 6,
		{INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZARRAYOID, BOOLOID}},
	};

	if (extension == plans_extension)
		return;

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
	plans_schema = schema;
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

	if (!OidIsValid(extension))
		return false;
	extension_schema_and_owner(extension, &schema, &owner);
	if (owner != GetUserId())
		return false;
	prepare_plans(extension, schema);
	return true;
}

/*
 * Copy a text datum as UTF-8 (what Kafka clients expect); NULL if it
 * cannot be converted.
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
copy_event(OutboxEvent *ev, OutboxRow *row)
{
	bool		not_utf8;
	int			len;
	const char *problem = NULL;

	ev->outcome = OUTBOX_IN_FLIGHT;
	ev->id = DatumGetInt64(row->values[LOG_ID]);
	ev->from_log = !row->isnull[LOG_TXID];
	ev->stored_topic = DatumGetTextPCopy(row->values[LOG_TOPIC]);
	ev->created_at = DatumGetTimestampTz(row->values[LOG_CREATED_AT]);
	strlcpy(ev->event_id,
			DatumGetCString(DirectFunctionCall1(uuid_out, row->values[LOG_EVENT_ID])),
			sizeof(ev->event_id));
	ev->topic = utf8_copy(row->values[LOG_TOPIC], &len);
	if (!row->isnull[LOG_KEY] &&
		(ev->key = utf8_copy(row->values[LOG_KEY], &ev->key_len)) == NULL)
		problem = "The key cannot be converted to UTF-8.";
	if (!row->isnull[LOG_PAYLOAD])
	{
		bytea	   *payload = DatumGetByteaPP(row->values[LOG_PAYLOAD]);

		ev->payload_len = VARSIZE_ANY_EXHDR(payload);
		ev->payload = palloc(ev->payload_len);
		memcpy(ev->payload, VARDATA_ANY(payload), ev->payload_len);
	}
	if (!row->isnull[LOG_HEADERS] && problem == NULL)
		problem = outbox_unpack_headers(DatumGetJsonbP(row->values[LOG_HEADERS]),
										ev, &not_utf8);
	if (ev->topic == NULL)
		problem = "The topic cannot be converted to UTF-8.";

	if (problem != NULL)
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = problem;
		ev->permanent = true;
	}
}

/* Run a kept plan that returns one row; its first column. */
static Datum
run_value_plan(int which, Datum *values, bool *isnull)
{
	int			ret = SPI_execute_plan(plans[which], values, NULL, false, 0);

	if (ret < 0 || SPI_processed != 1)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
}

/* Read the reader row into reader, its arrays in memory context cxt. */
static void
read_reader(OutboxReader *reader, MemoryContext cxt)
{
	HeapTuple	tuple;
	TupleDesc	desc;
	MemoryContext spi_cxt;
	bool		isnull;
	int			ret = SPI_execute_plan(plans[READER_PLAN], NULL, NULL, false, 0);

	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "outbox reader row not found");
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	reader->last_id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
	spi_cxt = MemoryContextSwitchTo(cxt);
	reader->nrunning = outbox_xids_of(SPI_getbinval(tuple, desc, 2, &isnull), &reader->running);
	reader->ndraining = outbox_xids_of(SPI_getbinval(tuple, desc, 3, &isnull), &reader->draining);
	MemoryContextSwitchTo(spi_cxt);
	reader->drain_upto = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
	reader->drain_after = DatumGetInt64(SPI_getbinval(tuple, desc, 5, &isnull));
}

/* Save reader, and count nread more log events whose outcome is due. */
static void
save_reader(OutboxReader *reader, int nread)
{
	Datum		values[6];
	int			ret;

	values[0] = Int64GetDatum(reader->last_id);
	values[1] = outbox_xid_array(reader->running, reader->nrunning);
	values[2] = outbox_xid_array(reader->draining, reader->ndraining);
	values[3] = Int64GetDatum(reader->drain_upto);
	values[4] = Int64GetDatum(reader->drain_after);
	values[5] = Int64GetDatum(nread);
	ret = SPI_execute_plan(plans[SAVE_PLAN], values, NULL, false, 0);
	if (ret != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "outbox reader row not updated");
}

/*
 * Claim the due events of the retry table into rows, at most room of them,
 * while their bytes stay below *bytes_left (reduced by what they take);
 * copies in memory context cxt.  Returns how many.
 */
static int
claim_retries(int room, int64 *bytes_left, OutboxRow *rows, MemoryContext cxt)
{
	Datum		values[1];
	int			ret;
	int			n = 0;

	values[0] = Int32GetDatum(room);
	ret = SPI_execute_plan(plans[RETRIES_PLAN], values, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	for (uint64 i = 0; i < SPI_processed && *bytes_left > 0; i++)
	{
		Datum		values[OUTBOX_LOG_COLUMNS];
		bool		isnull[OUTBOX_LOG_COLUMNS];
		MemoryContext spi_cxt;

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, isnull);
		spi_cxt = MemoryContextSwitchTo(cxt);
		outbox_copy_row(SPI_tuptable->tupdesc, values, isnull, true, &rows[n]);
		MemoryContextSwitchTo(spi_cxt);
		*bytes_left -= rows[n++].bytes;
	}
	return n;
}

/*
 * Of the n log events of rows, keep those to send now: not those in the
 * retry table already (recorded after a failed batch), and not those whose
 * key has an unfinished event there, which are copied there to wait their
 * turn.  Returns how many are kept, moved to the front of rows.
 */
static int
hold_back(OutboxRow *rows, int n)
{
	Datum	   *ids = palloc(n * sizeof(Datum));
	Datum	   *topics = palloc(n * sizeof(Datum));
	Datum	   *keys = palloc(n * sizeof(Datum));
	bool	   *key_nulls = palloc(n * sizeof(bool));
	bool	   *skip = palloc0(n * sizeof(bool));
	Datum	   *held = palloc(n * sizeof(Datum));
	int			nheld = 0;
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Datum		values[5];
	int			ret;
	int			kept = 0;

	for (int i = 0; i < n; i++)
	{
		ids[i] = rows[i].values[LOG_ID];
		topics[i] = rows[i].values[LOG_TOPIC];
		keys[i] = rows[i].values[LOG_KEY];
		key_nulls[i] = rows[i].isnull[LOG_KEY];
	}
	values[0] = PointerGetDatum(construct_array(ids, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = PointerGetDatum(construct_array(topics, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[2] = PointerGetDatum(construct_md_array(keys, key_nulls, 1, dims, lbs,
												   TEXTOID, -1, false, TYPALIGN_INT));
	values[3] = ids[0];
	values[4] = ids[n - 1];
	ret = SPI_execute_plan(plans[HELD_PLAN], values, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			i = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull)) - 1;
		bool		there = DatumGetBool(SPI_getbinval(tuple, desc, 2, &isnull));

		skip[i] = true;
		if (!there)
			held[nheld++] = ids[i];
	}
	if (nheld > 0)
	{
		bool		isnull;

		values[0] = PointerGetDatum(construct_array(held, nheld, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		run_value_plan(COPY_PLAN, values, &isnull);
	}
	for (int i = 0; i < n; i++)
		if (!skip[i])
			rows[kept++] = rows[i];
	return kept;
}

static int
row_id_cmp(const void *a, const void *b)
{
	int64		x = DatumGetInt64(((const OutboxRow *) a)->values[LOG_ID]);
	int64		y = DatumGetInt64(((const OutboxRow *) b)->values[LOG_ID]);

	return (x > y) - (x < y);
}

/*
 * Claim up to batch_size due events, and at most about max_bytes of them,
 * into *rows (allocated in the caller's memory context), in id order;
 * returns how many.  First the due events of the retry table, locked until
 * the end of the transaction; then the next events of the log, which the
 * reader row moves past.  Every log event claimed must be recorded
 * (outbox_mark_published, outbox_mark_failed, outbox_mark_released) before
 * the transaction commits.  One claim runs at a time: a second claimer gets
 * nothing until the first ends.
 */
static int
claim_rows(int batch_size, int64 max_bytes, OutboxRow **rows)
{
	MemoryContext cxt = CurrentMemoryContext;
	int64		bytes_left = max_bytes;
	OutboxReader reader;
	MemoryContext spi_cxt;
	bool		isnull;
	int			nretried;
	int			nlog;
	int			n = 0;

	/* up to batch_size: as many as one allocation can hold */
	batch_size = Min(batch_size, (int) (MaxAllocSize / sizeof(OutboxRow)) - 1);
	*rows = palloc((Max(batch_size, 0) + 1) * sizeof(OutboxRow));
	SPI_connect();
	if (batch_size > 0 && DatumGetBool(run_value_plan(LOCK_PLAN, NULL, &isnull)))
	{
		read_reader(&reader, cxt);
		nretried = claim_retries(batch_size, &bytes_left, *rows, cxt);

		spi_cxt = MemoryContextSwitchTo(cxt);
		nlog = outbox_read_log(plans_schema, &reader, batch_size - nretried,
							   &bytes_left, *rows + nretried);
		MemoryContextSwitchTo(spi_cxt);
		if (nlog > 0)
			nlog = hold_back(*rows + nretried, nlog);
		save_reader(&reader, nlog);
		n = nretried + nlog;
	}
	SPI_finish();
	qsort(*rows, n, sizeof(OutboxRow), row_id_cmp);
	return n;
}

/*
 * Claim up to batch_size due events, of about BATCH_MAX_BYTES at most, for
 * this transaction.  The batch is allocated in the caller's memory context.
 */
OutboxBatch *
outbox_claim_batch(int batch_size)
{
	MemoryContext rows_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "outbox claimed rows",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext batch_cxt = MemoryContextSwitchTo(rows_cxt);
	OutboxBatch *batch;
	OutboxRow  *rows;
	int			n = claim_rows(batch_size, BATCH_MAX_BYTES, &rows);

	MemoryContextSwitchTo(batch_cxt);
	batch = palloc0(sizeof(OutboxBatch));
	batch->count = n;
	batch->events = palloc0(Max(n, 1) * sizeof(OutboxEvent));
	for (int i = 0; i < n; i++)
		copy_event(&batch->events[i], &rows[i]);
	MemoryContextDelete(rows_cxt);
	return batch;
}

PG_FUNCTION_INFO_V1(outbox_claim);

/*
 * outbox_claim(batch_size integer, max_bytes bigint)
 *		RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
 *					   payload bytea, headers jsonb)
 *
 * The claim of the worker, for SQL: see claim_rows.
 */
Datum
outbox_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		batch_size = PG_GETARG_INT32(0);
	Oid			extension = get_extension_oid("outbox", false);
	Oid			schema;
	Oid			owner;
	OutboxRow  *rows;
	int			n;

	if (batch_size < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must not be negative")));
	InitMaterializedSRF(fcinfo, 0);
	extension_schema_and_owner(extension, &schema, &owner);
	prepare_plans(extension, schema);
	n = claim_rows(batch_size, PG_GETARG_INT64(1), &rows);
	for (int i = 0; i < n; i++)
	{
		static const int columns[6] = {LOG_ID, LOG_EVENT_ID, LOG_TOPIC, LOG_KEY,
		LOG_PAYLOAD, LOG_HEADERS};
		Datum		values[6];
		bool		isnull[6];

		for (int c = 0; c < 6; c++)
		{
			values[c] = rows[i].values[columns[c]];
			isnull[c] = rows[i].isnull[columns[c]];
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
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

/* Arrays of the outcomes of a batch, built up as parameters of one plan. */
typedef struct OutcomeArrays
{
	int			n;
	Datum	   *ids;
	Datum	   *partitions;
	Datum	   *offsets;
	Datum	   *texts;			/* topics, or errors */
	Datum	   *more;			/* creation times, or permanent */
} OutcomeArrays;

static void
outcome_arrays_init(OutcomeArrays *a, int size)
{
	a->n = 0;
	a->ids = palloc(size * sizeof(Datum));
	a->partitions = palloc(size * sizeof(Datum));
	a->offsets = palloc(size * sizeof(Datum));
	a->texts = palloc(size * sizeof(Datum));
	a->more = palloc(size * sizeof(Datum));
}

static Datum
int8_array(Datum *values, int n)
{
	return PointerGetDatum(construct_array(values, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Record the outcome of each event of the batch: delivered ones become
 * published (those of the log with what the batch holds of them, no
 * lookup), refused ones failed or abandoned, released ones are due again
 * with no attempt counted.
 */
void
outbox_record_outcomes(OutboxBatch *batch)
{
	int			n = batch->count;
	OutcomeArrays logged;
	OutcomeArrays retried;
	OutcomeArrays failed;
	OutcomeArrays released;

	outcome_arrays_init(&logged, n);
	outcome_arrays_init(&retried, n);
	outcome_arrays_init(&failed, n);
	outcome_arrays_init(&released, n);
	for (int i = 0; i < n; i++)
	{
		OutboxEvent *ev = &batch->events[i];
		OutcomeArrays *a;

		if (ev->outcome == OUTBOX_DELIVERED)
		{
			a = ev->from_log ? &logged : &retried;
			a->partitions[a->n] = Int32GetDatum(ev->partition);
			a->offsets[a->n] = Int64GetDatum(ev->offset);
			a->texts[a->n] = PointerGetDatum(ev->stored_topic);
			a->more[a->n] = TimestampTzGetDatum(ev->created_at);
		}
		else if (ev->outcome == OUTBOX_REFUSED)
		{
			a = &failed;
			a->texts[a->n] = CStringGetTextDatum(ev->error);
			a->more[a->n] = BoolGetDatum(ev->permanent);
		}
		else
			a = &released;
		a->ids[a->n++] = Int64GetDatum(ev->id);
	}

	SPI_connect();
	if (logged.n > 0)
	{
		Datum		values[6];

		values[0] = int8_array(logged.ids, logged.n);
		values[1] = PointerGetDatum(construct_array(logged.partitions, logged.n, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = int8_array(logged.offsets, logged.n);
		values[3] = PointerGetDatum(construct_array(logged.texts, logged.n, TEXTOID, -1, false, TYPALIGN_INT));
		values[4] = PointerGetDatum(construct_array(logged.more, logged.n, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[5] = BoolGetDatum(outbox_published_retention != 0);
		run_count_plan(LOGGED_PLAN, values);
	}
	if (retried.n > 0)
	{
		Datum		values[4];

		values[0] = int8_array(retried.ids, retried.n);
		values[1] = PointerGetDatum(construct_array(retried.partitions, retried.n, INT4OID, 4, true, TYPALIGN_INT));
		values[2] = int8_array(retried.offsets, retried.n);
		values[3] = BoolGetDatum(outbox_published_retention != 0);
		run_count_plan(PUBLISHED_PLAN, values);
	}
	if (failed.n > 0)
	{
		Datum		values[8];

		values[0] = int8_array(failed.ids, failed.n);
		values[1] = PointerGetDatum(construct_array(failed.texts, failed.n, TEXTOID, -1, false, TYPALIGN_INT));
		values[2] = PointerGetDatum(construct_array(failed.more, failed.n, BOOLOID, 1, true, TYPALIGN_CHAR));
		values[3] = Int32GetDatum(outbox_max_attempts);
		values[4] = interval_datum(outbox_retry_base_delay / 1000.0);
		values[5] = interval_datum(outbox_retry_max_delay / 1000.0);
		values[6] = Float8GetDatum(outbox_retry_jitter);
		values[7] = CStringGetTextDatum(outbox_dead_letter_topic);
		run_count_plan(FAILED_PLAN, values);
	}
	if (released.n > 0)
	{
		Datum		values[1];

		values[0] = int8_array(released.ids, released.n);
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
	bool		isnull;
	int64		last_id;
	bool		due;

	SPI_connect();
	ret = SPI_execute_plan(plans[DUE_PLAN], NULL, NULL, true, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	last_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	due = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	return due || outbox_log_has_after(plans_schema, last_id);
}
