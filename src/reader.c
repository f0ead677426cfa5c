/*-------------------------------------------------------------------------
 *
 * reader.c
 *		Reading the event log in id order: the log part of a claim, the
 *		log rows of given ids, the unread events per topic.
 *
 * The log tables are read with index scans opened here, not with SQL:
 * they are never vacuumed, so never analyzed, and the planner, without
 * statistics, was measured to answer "the next 1,000 ids past last_id"
 * with a sort of the whole backlog, per batch.  An index scan of each of
 * the four tables, merged by id, reads what the batch takes and no more.
 * The only functions evaluated are built-in btree comparisons.  Reading
 * events needs the SELECT privilege on each log table; counting them
 * (outbox_unread_events) only the right to run the function.
 *
 * The claim reads the log in id order past the highest id it has read.
 * outbox_enqueue takes its transaction's xid before the event's id, so an
 * event with a smaller id that the claim could not see belongs to a
 * transaction that had its xid when the snapshot was taken and had not
 * ended: one in the snapshot's xip, or one at or past its xmax (which xip
 * leaves out) whose xid was assigned before the snapshot.  All of those
 * are below the next xid read after the snapshot.  Prepared transactions
 * are in xip until COMMIT PREPARED.  Those transactions are kept as
 * running; once one has ended, its events up to that highest id are read
 * through the (txid, id) indexes.
 *
 * src/reader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "outbox.h"

const char *const outbox_log_column_names[OUTBOX_LOG_COLUMNS] = {
	"id", "txid", "event_id", "topic", "key", "payload", "headers", "created_at"
};

/* one index scan of one log table, and the row it is at */
typedef struct LogStream
{
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		at_row;
} LogStream;

/* index scans of the log tables, read as one stream in id order */
typedef struct LogCursor
{
	Snapshot	snapshot;
	Relation	tables[OUTBOX_LOG_TABLES];
	int			nstreams;
	LogStream  *streams;
} LogCursor;

/*
 * Open the log tables of schema nspid for reading with snapshot; with
 * check_acl, check that the current user may read them.
 */
static void
cursor_open(LogCursor *cursor, Oid nspid, Snapshot snapshot, int max_streams,
			bool check_acl)
{
	cursor->snapshot = snapshot;
	cursor->nstreams = 0;
	cursor->streams = palloc(max_streams * sizeof(LogStream));
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		char		name[NAMEDATALEN];
		Oid			relid;
		AclResult	aclresult;
		TupleDesc	desc;

		snprintf(name, sizeof(name), "outbox_log_%d", t);
		relid = outbox_relation_in(nspid, name);
		aclresult = check_acl ? pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) : ACLCHECK_OK;
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_TABLE, name);
		cursor->tables[t] = table_open(relid, AccessShareLock);
		desc = RelationGetDescr(cursor->tables[t]);
		if (desc->natts != OUTBOX_LOG_COLUMNS)
			elog(ERROR, "log table \"%s\" has unexpected columns", name);
		for (int i = 0; i < OUTBOX_LOG_COLUMNS; i++)
			if (strcmp(NameStr(TupleDescAttr(desc, i)->attname),
					   outbox_log_column_names[i]) != 0)
				elog(ERROR, "log table \"%s\" has unexpected columns", name);
	}
}

/* Move a stream to its next row. */
static void
stream_advance(LogStream *stream)
{
	stream->at_row = index_getnext_slot(stream->scan, ForwardScanDirection,
										stream->slot);
}

/*
 * Add a scan of log table t with the given keys, through its btree index
 * on (id) (by_txid false) or (txid, id): rows come in id order.
 */
static void
cursor_add(LogCursor *cursor, int t, bool by_txid, ScanKey keys, int nkeys)
{
	Relation	table = cursor->tables[t];
	LogStream  *stream = &cursor->streams[cursor->nstreams++];
	char		name[NAMEDATALEN];
	Form_pg_index index;

	snprintf(name, sizeof(name), "outbox_log_%d_%s", t, by_txid ? "txid" : "id");
	stream->index = index_open(outbox_relation_in(RelationGetNamespace(table), name),
							   AccessShareLock);
	index = stream->index->rd_index;
	if (stream->index->rd_rel->relam != BTREE_AM_OID ||
		index->indrelid != RelationGetRelid(table) ||
		index->indnkeyatts != (by_txid ? 2 : 1) ||
		index->indkey.values[0] != (by_txid ? LOG_TXID + 1 : LOG_ID + 1) ||
		(by_txid && index->indkey.values[1] != LOG_ID + 1))
		elog(ERROR, "index \"%s\" is not the one outbox expects", name);
	stream->slot = table_slot_create(table, NULL);
	stream->scan = index_beginscan(table, stream->index, cursor->snapshot, nkeys, 0);
	index_rescan(stream->scan, keys, nkeys, NULL, 0);
	stream_advance(stream);
}

static int64
stream_id(LogStream *stream)
{
	bool		isnull;

	return DatumGetInt64(slot_getattr(stream->slot, LOG_ID + 1, &isnull));
}

/* The stream whose row has the smallest id; NULL when all are done. */
static LogStream *
cursor_head(LogCursor *cursor)
{
	LogStream  *head = NULL;

	for (int i = 0; i < cursor->nstreams; i++)
	{
		LogStream  *stream = &cursor->streams[i];

		if (stream->at_row && (head == NULL || stream_id(stream) < stream_id(head)))
			head = stream;
	}
	return head;
}

/* What the byte limit of a batch counts of an event: payload, key, headers. */
static int64
row_bytes(OutboxRow *row)
{
	int64		bytes = 0;

	if (!row->isnull[LOG_PAYLOAD])
		bytes += toast_raw_datum_size(row->values[LOG_PAYLOAD]) - VARHDRSZ;
	if (!row->isnull[LOG_KEY])
		bytes += toast_raw_datum_size(row->values[LOG_KEY]) - VARHDRSZ;
	if (!row->isnull[LOG_HEADERS])
		bytes += toast_datum_size(row->values[LOG_HEADERS]);
	return bytes;
}

/*
 * Copy the log columns of a row (values and isnull of a tuple of desc,
 * whose first columns are those of the log) into row, in the current
 * memory context, detoasted.  Unless whole, only its id, topic and
 * created_at are copied, the other columns are null.
 */
void
outbox_copy_row(TupleDesc desc, Datum *values, bool *isnull, bool whole, OutboxRow *row)
{
	for (int i = 0; i < OUTBOX_LOG_COLUMNS; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		row->isnull[i] = isnull[i] ||
			!(whole || i == LOG_ID || i == LOG_TOPIC || i == LOG_CREATED_AT);
		if (row->isnull[i])
			row->values[i] = (Datum) 0;
		else if (attr->attlen == -1)
			row->values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[i]));
		else
			row->values[i] = datumCopy(values[i], attr->attbyval, attr->attlen);
	}
	row->bytes = row_bytes(row);
}

/*
 * Copy the next row in id order into row, in the current memory context,
 * detoasted; false when there is none.  Unless whole, only its id, topic
 * and created_at are copied, the other columns are null.
 */
static bool
cursor_next(LogCursor *cursor, OutboxRow *row, bool whole)
{
	LogStream  *stream = cursor_head(cursor);

	if (stream == NULL)
		return false;
	slot_getallattrs(stream->slot);
	outbox_copy_row(stream->slot->tts_tupleDescriptor, stream->slot->tts_values,
					stream->slot->tts_isnull, whole, row);
	stream_advance(stream);
	return true;
}

static void
cursor_close(LogCursor *cursor)
{
	for (int i = 0; i < cursor->nstreams; i++)
	{
		index_endscan(cursor->streams[i].scan);
		ExecDropSingleTupleTableSlot(cursor->streams[i].slot);
		index_close(cursor->streams[i].index, NoLock);
	}
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
		table_close(cursor->tables[t], NoLock);
	pfree(cursor->streams);
}

/* Read every row with an id greater than after. */
static void
cursor_open_after(LogCursor *cursor, Oid nspid, Snapshot snapshot, int64 after,
				  bool check_acl)
{
	cursor_open(cursor, nspid, snapshot, OUTBOX_LOG_TABLES, check_acl);
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		ScanKeyData key;

		ScanKeyInit(&key, 1, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
		cursor_add(cursor, t, false, &key, 1);
	}
}

/* Read the rows of the transactions txids with an id in (after, upto]. */
static void
cursor_open_txids(LogCursor *cursor, Oid nspid, Snapshot snapshot,
				  FullTransactionId *txids, int ntxids, int64 after, int64 upto,
				  bool check_acl)
{
	cursor_open(cursor, nspid, snapshot, OUTBOX_LOG_TABLES * ntxids, check_acl);
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
		for (int i = 0; i < ntxids; i++)
		{
			ScanKeyData keys[3];

			ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_XID8EQ,
						FullTransactionIdGetDatum(txids[i]));
			ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
			ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(upto));
			cursor_add(cursor, t, true, keys, 3);
		}
}

/*
 * Read up to room rows into rows while the bytes read stay below
 * *bytes_left, which is reduced by what they take; returns how many were
 * read, and sets *more if the cursor has rows left.
 */
static int
read_rows(LogCursor *cursor, OutboxRow *rows, int room, int64 *bytes_left, bool *more)
{
	int			n = 0;

	while (n < room && *bytes_left > 0 && cursor_next(cursor, &rows[n], true))
		*bytes_left -= rows[n++].bytes;
	*more = cursor_head(cursor) != NULL;
	return n;
}

/*
 * The full xid of xid, which is not older than 2^31 xids before next.
 */
static FullTransactionId
widen_xid(FullTransactionId next, TransactionId xid)
{
	uint64		epoch = EpochFromFullTransactionId(next);

	if (xid > XidFromFullTransactionId(next))
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

/*
 * The transactions in progress in snapshot: those of its xip, and every
 * xid from its xmax up to the next xid now; not the caller's own, whose
 * events the snapshot sees.  Returns how many, in *xids (palloc'd).
 */
static int
in_progress(Snapshot snapshot, FullTransactionId **xids)
{
	FullTransactionId next = ReadNextFullTransactionId();
	FullTransactionId xmax = widen_xid(next, snapshot->xmax);
	FullTransactionId mine = GetTopFullTransactionIdIfAny();
	uint64		nrange = U64FromFullTransactionId(next) - U64FromFullTransactionId(xmax);
	int			n = 0;

	if (nrange > MaxArraySize - snapshot->xcnt)
		elog(ERROR, "too many transactions in progress");
	*xids = palloc((snapshot->xcnt + nrange + 1) * sizeof(FullTransactionId));
	for (int i = 0; i < snapshot->xcnt; i++)
		(*xids)[n++] = widen_xid(next, snapshot->xip[i]);
	for (uint64 x = U64FromFullTransactionId(xmax); x < U64FromFullTransactionId(next); x++)
		if (x != U64FromFullTransactionId(mine))
			(*xids)[n++] = FullTransactionIdFromU64(x);
	return n;
}

/* Is xid, of running, among the n xids of set? */
static bool
xid_in(FullTransactionId xid, FullTransactionId *set, int n)
{
	for (int i = 0; i < n; i++)
		if (FullTransactionIdEquals(xid, set[i]))
			return true;
	return false;
}

/* The xids of an xid8[] datum, palloc'd; returns how many. */
int
outbox_xids_of(Datum array, FullTransactionId **xids)
{
	Datum	   *datums;
	int			n;

	deconstruct_array(DatumGetArrayTypeP(array), XID8OID, sizeof(FullTransactionId),
					  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &datums, NULL, &n);
	*xids = palloc((n + 1) * sizeof(FullTransactionId));
	for (int i = 0; i < n; i++)
		(*xids)[i] = DatumGetFullTransactionId(datums[i]);
	return n;
}

/* An xid8[] datum of n xids. */
Datum
outbox_xid_array(FullTransactionId *xids, int n)
{
	Datum	   *datums = palloc((n + 1) * sizeof(Datum));

	for (int i = 0; i < n; i++)
		datums[i] = FullTransactionIdGetDatum(xids[i]);
	return PointerGetDatum(construct_array(datums, n, XID8OID, sizeof(FullTransactionId),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Read the next events of the log of schema nspid for a claim, at most
 * room of them, and while the bytes read stay below *bytes_left (reduced
 * by what they take), into rows; returns how many, in id order, and moves
 * reader past them.  First the events of transactions that have ended
 * since they were running, then those past last_id.
 */
int
outbox_read_log(Oid nspid, OutboxReader *reader, int room, int64 *bytes_left,
				OutboxRow *rows)
{
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	LogCursor	cursor;
	int			n = 0;
	bool		more;

	if (reader->ndraining == 0)
	{
		int			still = 0;

		reader->draining = palloc(Max(reader->nrunning, 1) * sizeof(FullTransactionId));
		for (int i = 0; i < reader->nrunning; i++)
		{
			FullTransactionId xid = reader->running[i];

			if (XidInMVCCSnapshot(XidFromFullTransactionId(xid), snapshot))
				reader->running[still++] = xid;
			else
				reader->draining[reader->ndraining++] = xid;
		}
		reader->nrunning = still;
		reader->drain_upto = reader->last_id;
		reader->drain_after = 0;
	}

	if (reader->ndraining > 0 && room > 0 && *bytes_left > 0)
	{
		cursor_open_txids(&cursor, nspid, snapshot, reader->draining, reader->ndraining,
						  reader->drain_after, reader->drain_upto, true);
		n = read_rows(&cursor, rows, room, bytes_left, &more);
		cursor_close(&cursor);
		if (more)
			reader->drain_after = DatumGetInt64(rows[n - 1].values[LOG_ID]);
		else
		{
			reader->ndraining = 0;
			reader->drain_after = 0;
		}
	}

	if (n < room && *bytes_left > 0)
	{
		int			fresh;

		cursor_open_after(&cursor, nspid, snapshot, reader->last_id, true);
		fresh = read_rows(&cursor, rows + n, room - n, bytes_left, &more);
		cursor_close(&cursor);
		if (fresh > 0)
		{
			FullTransactionId *xids;
			int			nxids = in_progress(snapshot, &xids);

			reader->last_id = DatumGetInt64(rows[n + fresh - 1].values[LOG_ID]);
			reader->running = repalloc(reader->running,
									   (reader->nrunning + nxids + 1) * sizeof(FullTransactionId));
			for (int i = 0; i < nxids; i++)
				if (!xid_in(xids[i], reader->running, reader->nrunning))
					reader->running[reader->nrunning++] = xids[i];
		}
		n += fresh;
	}
	UnregisterSnapshot(snapshot);
	return n;
}

/*
 * Does the log of schema nspid hold an event past id after?
 */
bool
outbox_log_has_after(Oid nspid, int64 after)
{
	LogCursor	cursor;
	bool		found;

	cursor_open_after(&cursor, nspid, GetActiveSnapshot(), after, true);
	found = cursor_head(&cursor) != NULL;
	cursor_close(&cursor);
	return found;
}

/*
 * Put every row of cursor in rsinfo, and close it: all its columns if
 * whole, else its id, topic and created_at.
 */
static void
put_rows(LogCursor *cursor, ReturnSetInfo *rsinfo, bool whole)
{
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext,
													  "outbox log row",
													  ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller_context = MemoryContextSwitchTo(row_context);
	OutboxRow	row;

	while (cursor_next(cursor, &row, whole))
	{
		Datum		values[3] = {row.values[LOG_ID], row.values[LOG_TOPIC],
		row.values[LOG_CREATED_AT]};
		bool		isnull[3] = {false, false, false};

		if (whole)
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.isnull);
		else
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
		MemoryContextReset(row_context);
	}
	MemoryContextSwitchTo(caller_context);
	MemoryContextDelete(row_context);
	cursor_close(cursor);
}

PG_FUNCTION_INFO_V1(outbox_in_progress);
PG_FUNCTION_INFO_V1(outbox_log_rows);
PG_FUNCTION_INFO_V1(outbox_unread_events);

/*
 * outbox_in_progress() RETURNS xid8[]
 *
 * The transactions in progress in the active snapshot (see in_progress).
 */
Datum
outbox_in_progress(PG_FUNCTION_ARGS)
{
	FullTransactionId *xids;
	int			n;

	if (!ActiveSnapshotSet())
		elog(ERROR, "outbox_in_progress() needs an active snapshot");
	n = in_progress(GetActiveSnapshot(), &xids);
	PG_RETURN_DATUM(outbox_xid_array(xids, n));
}

/*
 * outbox_log_rows(ids bigint[]) RETURNS SETOF outbox_log
 *
 * The log rows of the given ids that the active snapshot sees, in id
 * order: an index search of each log table.
 */
Datum
outbox_log_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(0);
	LogCursor	cursor;

	InitMaterializedSRF(fcinfo, 0);
	if (ARR_NDIM(ids) > 1 || array_contains_nulls(ids))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ids must be a one-dimensional array without nulls")));
	if (ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids)) == 0)
		PG_RETURN_NULL();

	cursor_open(&cursor, outbox_function_namespace(fcinfo), GetActiveSnapshot(),
				OUTBOX_LOG_TABLES, true);
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		ScanKeyData key;

		ScanKeyEntryInitialize(&key, SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
							   INT8OID, InvalidOid, F_INT8EQ, PointerGetDatum(ids));
		cursor_add(&cursor, t, false, &key, 1);
	}
	put_rows(&cursor, rsinfo, true);
	PG_RETURN_NULL();
}

/* A field of a reader row, which must not be null. */
static Datum
reader_field(HeapTupleHeader reader, const char *field)
{
	bool		isnull;
	Datum		value = GetAttributeByName(reader, field, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("field \"%s\" of the reader row must not be null", field)));
	return value;
}

/* The xids of an xid8[] field of a reader row; returns how many. */
static int
reader_xids(HeapTupleHeader reader, const char *field, FullTransactionId **xids)
{
	return outbox_xids_of(reader_field(reader, field), xids);
}

static int64
reader_int8(HeapTupleHeader reader, const char *field)
{
	return DatumGetInt64(reader_field(reader, field));
}

/*
 * outbox_unread_events(r outbox_reader)
 *		RETURNS TABLE (id bigint, topic text, created_at timestamptz)
 *
 * The log events that the reader r has not read yet, as the active
 * snapshot sees them: past last_id, of a running transaction, or of a
 * draining one and not read yet.  outbox_stats counts them.  No event's
 * content: the right to run it (EXECUTE) is enough, so that a monitoring
 * role needs no right to read the log.
 */
Datum
outbox_unread_events(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HeapTupleHeader reader = PG_GETARG_HEAPTUPLEHEADER(0);
	Oid			nspid = outbox_function_namespace(fcinfo);
	Snapshot	snapshot = GetActiveSnapshot();
	int64		last_id = reader_int8(reader, "last_id");
	FullTransactionId *xids;
	int			n;
	LogCursor	cursor;

	InitMaterializedSRF(fcinfo, 0);
	cursor_open_after(&cursor, nspid, snapshot, last_id, false);
	put_rows(&cursor, rsinfo, false);
	if ((n = reader_xids(reader, "running", &xids)) > 0)
	{
		cursor_open_txids(&cursor, nspid, snapshot, xids, n, PG_INT64_MIN, last_id, false);
		put_rows(&cursor, rsinfo, false);
	}
	if ((n = reader_xids(reader, "draining", &xids)) > 0)
	{
		cursor_open_txids(&cursor, nspid, snapshot, xids, n,
						  reader_int8(reader, "drain_after"),
						  reader_int8(reader, "drain_upto"), false);
		put_rows(&cursor, rsinfo, false);
	}
	PG_RETURN_NULL();
}
