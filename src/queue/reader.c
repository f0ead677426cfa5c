/*-------------------------------------------------------------------------
 *
 * reader.c
 *		Reading the event log in id order: the log part of a claim, the log
 *		rows of given ids, and the unread events that monitoring counts,
 *		with index scans of the log tables merged by id, not with SQL.
 *		docs/design.md, "Storage: a log that publishing does not rewrite"
 *		and "Why no event is skipped", says why.
 *
 * src/queue/reader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/binaryheap.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "queue/reader.h"
#include "queue/reader_row.h"

/*
 * Counting unread events for monitoring stops after this many; the rest
 * is an estimate bounded from above, so that a look at the queue costs
 * about the same with ten million unread events as with ten thousand.
 */
#define UNREAD_COUNT_LIMIT 10000
/* and reads the rows of at most this many running or draining transactions */
#define UNREAD_COUNT_MAX_XIDS 1000
/* and looks at no more than this many index entries */
#define UNREAD_SCAN_BUDGET (2 * UNREAD_COUNT_LIMIT)

/* one index scan of one log table, and the row it is at */
typedef struct LogStream
{
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		at_row;
	bool		by_txid;		/* through the (txid, id) index */
	/* with a budget: */
	int64		seen_id;		/* no row left lies below this id */
	bool		stopped;		/* the budget ran out before the scan ended */
} LogStream;

/* index scans of the log tables, read as one stream in id order */
typedef struct LogCursor
{
	const OutboxExtension *ext;
	Snapshot	snapshot;
	Relation	tables[OUTBOX_LOG_TABLES];
	int			nstreams;
	int			max_streams;
	LogStream  *streams;
	int64		budget;			/* index entries left to look at; -1: no bound */
	bool		exhausted;		/* a scan stopped for want of budget */
} LogCursor;

/*
 * Open the log tables of ext for reading with snapshot, for up to
 * max_streams scans; with check_acl, check that the current user may read
 * them.
 */
static void
cursor_open(LogCursor *cursor, const OutboxExtension *ext, Snapshot snapshot,
			int max_streams, bool check_acl)
{
	cursor->ext = ext;
	cursor->snapshot = snapshot;
	cursor->budget = -1;
	cursor->exhausted = false;
	cursor->nstreams = 0;
	cursor->max_streams = max_streams;
	cursor->streams = palloc(Max(max_streams, 1) * sizeof(LogStream));
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		char		name[NAMEDATALEN];
		Oid			relid;
		AclResult	aclresult;
		TupleDesc	desc;

		snprintf(name, sizeof(name), "outbox_log_%d", t);
		relid = outbox_relation(ext, name);
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

/*
 * Move a stream to its next row that the cursor's snapshot sees.  With a
 * budget, each index entry looked at spends one (and, read by id, moves
 * seen_id on), and a stream whose budget runs out stops, marking itself
 * and the cursor.
 */
static void
stream_advance(LogCursor *cursor, LogStream *stream, ScanDirection direction)
{
	if (cursor->budget < 0)
	{
		stream->at_row = index_getnext_slot(stream->scan, direction, stream->slot);
		return;
	}

	/* index_getnext_slot, counted; an MVCC snapshot sees one tuple per entry */
	Assert(IsMVCCSnapshot(cursor->snapshot));
	stream->at_row = false;
	while (cursor->budget > 0)
	{
		bool		isnull;

		cursor->budget--;
		if (index_getnext_tid(stream->scan, direction) == NULL)
			return;
		if (!stream->by_txid)
			stream->seen_id = DatumGetInt64(index_getattr(stream->scan->xs_itup, 1,
														  stream->scan->xs_itupdesc, &isnull));
		if (index_fetch_heap(stream->scan, stream->slot))
		{
			stream->at_row = true;
			return;
		}
	}
	stream->stopped = true;
	cursor->exhausted = true;
}

/*
 * Begin a scan of log table t with the given keys, through its btree index
 * on (id) (by_txid false) or (txid, id), not positioned yet.  With a
 * budget, entries marked dead are returned too, so that each is counted,
 * and the index on (id) gives each entry's key.
 */
static LogStream *
cursor_scan(LogCursor *cursor, int t, bool by_txid, ScanKey keys, int nkeys)
{
	Relation	table = cursor->tables[t];
	LogStream  *stream;
	char		name[NAMEDATALEN];
	Form_pg_index index;

	Assert(cursor->nstreams < cursor->max_streams);
	stream = &cursor->streams[cursor->nstreams++];
	snprintf(name, sizeof(name), "outbox_log_%d_%s", t, by_txid ? "txid" : "id");
	stream->index = index_open(outbox_relation(cursor->ext, name), AccessShareLock);
	index = stream->index->rd_index;
	if (stream->index->rd_rel->relam != BTREE_AM_OID ||
		index->indrelid != RelationGetRelid(table) ||
		index->indnkeyatts != (by_txid ? 2 : 1) ||
		index->indkey.values[0] != (by_txid ? LOG_TXID + 1 : LOG_ID + 1) ||
		(by_txid && index->indkey.values[1] != LOG_ID + 1))
		elog(ERROR, "index \"%s\" is not the one outbox expects", name);
	stream->slot = table_slot_create(table, NULL);
	stream->at_row = false;
	stream->by_txid = by_txid;
	stream->seen_id = 1;
	stream->stopped = false;
	stream->scan = index_beginscan(table, stream->index, cursor->snapshot, nkeys, 0);
	if (cursor->budget >= 0)
	{
		stream->scan->xs_want_itup = !by_txid;
		stream->scan->ignore_killed_tuples = false;
	}
	index_rescan(stream->scan, keys, nkeys, NULL, 0);
	return stream;
}

/*
 * Add a scan of log table t with the given keys, through its btree index
 * on (id) (by_txid false) or (txid, id), at its first row: rows come in id
 * order, or in reverse with direction backward.
 */
static void
cursor_add(LogCursor *cursor, int t, bool by_txid, ScanKey keys, int nkeys,
		   ScanDirection direction)
{
	stream_advance(cursor, cursor_scan(cursor, t, by_txid, keys, nkeys), direction);
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

/*
 * Keep the next row in id order in ev, in the current memory context,
 * detoasted; false when there is none.
 */
static bool
cursor_next(LogCursor *cursor, OutboxEvent *ev)
{
	LogStream  *stream = cursor_head(cursor);

	if (stream == NULL)
		return false;
	slot_getallattrs(stream->slot);
	outbox_event_store(ev, stream->slot->tts_tupleDescriptor,
					   stream->slot->tts_values, stream->slot->tts_isnull);
	stream_advance(cursor, stream, ForwardScanDirection);
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

/* Add scans of every row with an id greater than after. */
static void
cursor_add_after(LogCursor *cursor, int64 after)
{
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		ScanKeyData key;
		LogStream  *stream;

		ScanKeyInit(&key, 1, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
		stream = cursor_scan(cursor, t, false, &key, 1);
		stream->seen_id = after + 1;
		stream_advance(cursor, stream, ForwardScanDirection);
	}
}

/* Add scans of the rows of the transactions txids with an id in (after, upto]. */
static void
cursor_add_txids(LogCursor *cursor, FullTransactionId *txids, int ntxids,
				 int64 after, int64 upto)
{
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
		for (int i = 0; i < ntxids; i++)
		{
			ScanKeyData keys[3];

			ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_XID8EQ,
						FullTransactionIdGetDatum(txids[i]));
			ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
			ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(upto));
			cursor_add(cursor, t, true, keys, 3, ForwardScanDirection);
		}
}

/*
 * Add scans of the rows of the transactions txids with an id in (after,
 * upto], one per table whatever their number: each returns the rows by
 * transaction, not in id order.  (A scan per transaction costs a scan
 * descriptor each, and their references to the same index make the
 * resource owner's bookkeeping quadratic.)
 */
static void
cursor_add_txid_set(LogCursor *cursor, FullTransactionId *txids, int ntxids,
					int64 after, int64 upto)
{
	Datum		array;

	if (ntxids == 0)
		return;
	array = outbox_xid_array(txids, ntxids);
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		ScanKeyData keys[3];
		LogStream  *stream;

		ScanKeyEntryInitialize(&keys[0], SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
							   XID8OID, InvalidOid, F_XID8EQ, array);
		ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
		ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(upto));
		stream = cursor_scan(cursor, t, true, keys, 3);
		stream->seen_id = Max(after, 0) + 1;	/* ids start at 1 */
		stream_advance(cursor, stream, ForwardScanDirection);
	}
}

/*
 * Read up to room events while the bytes read stay below *bytes_left,
 * which is reduced by what they take; returns how many were read, and sets
 * *more if the cursor has rows left.
 */
static int
read_events(LogCursor *cursor, OutboxEvent *events, int room, int64 *bytes_left,
			bool *more)
{
	int			n = 0;

	while (n < room && *bytes_left > 0 && cursor_next(cursor, &events[n]))
		*bytes_left -= events[n++].bytes;
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
 * xid from its xmax up to next, the next xid read just after the snapshot
 * was taken; not the caller's own, whose events the snapshot sees.
 * Returns how many, in *xids (palloc'd).
 *
 * A transaction takes its xid before the ids of its events (enqueue.c),
 * so one that started after the snapshot has no id below those the
 * snapshot sees.  Not the next xid at the end of the read: under a fast
 * stream of commits, every xid of the read's while, each to be drained
 * by a scan of its own at the next claim, made that claim slower and the
 * next set larger still (tens of thousands, measured).
 */
static int
in_progress(Snapshot snapshot, FullTransactionId next, FullTransactionId **xids)
{
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

/* Is xid among the n xids of set? */
static bool
xid_in(FullTransactionId xid, FullTransactionId *set, int n)
{
	for (int i = 0; i < n; i++)
		if (FullTransactionIdEquals(xid, set[i]))
			return true;
	return false;
}

/*
 * Read the next events of the log of ext for a claim, at most room of
 * them, and while the bytes read stay below *bytes_left (reduced by what
 * they take), into events; returns how many, in id order, and moves reader
 * past them.  First the events of transactions that have ended since they
 * were running, then those past last_id.
 */
int
outbox_read_log(const OutboxExtension *ext, OutboxReader *reader, int room,
				int64 *bytes_left, OutboxEvent *events)
{
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	FullTransactionId next = ReadNextFullTransactionId();
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
		cursor_open(&cursor, ext, snapshot, OUTBOX_LOG_TABLES * reader->ndraining, true);
		cursor_add_txids(&cursor, reader->draining, reader->ndraining,
						 reader->drain_after, reader->drain_upto);
		n = read_events(&cursor, events, room, bytes_left, &more);
		cursor_close(&cursor);
		if (more)
			reader->drain_after = events[n - 1].id;
		else
		{
			reader->ndraining = 0;
			reader->drain_after = 0;
		}
	}

	if (n < room && *bytes_left > 0)
	{
		int			fresh;

		cursor_open(&cursor, ext, snapshot, OUTBOX_LOG_TABLES, true);
		cursor_add_after(&cursor, reader->last_id);
		fresh = read_events(&cursor, events + n, room - n, bytes_left, &more);
		cursor_close(&cursor);
		if (fresh > 0)
		{
			FullTransactionId *xids;
			int			nxids = in_progress(snapshot, next, &xids);

			reader->last_id = events[n + fresh - 1].id;
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
 * Does the log of ext hold an event past id after?
 */
bool
outbox_log_has_after(const OutboxExtension *ext, int64 after)
{
	LogCursor	cursor;
	bool		found;

	cursor_open(&cursor, ext, GetActiveSnapshot(), OUTBOX_LOG_TABLES, true);
	cursor_add_after(&cursor, after);
	found = cursor_head(&cursor) != NULL;
	cursor_close(&cursor);
	return found;
}

/*
 * The first and the last id of log table t that snapshot sees; false if
 * it sees none.
 */
bool
outbox_log_table_range(const OutboxExtension *ext, int t, Snapshot snapshot,
					   int64 *first_id, int64 *last_id)
{
	LogCursor	cursor;
	bool		found;

	cursor_open(&cursor, ext, snapshot, 2, true);
	cursor_add(&cursor, t, false, NULL, 0, ForwardScanDirection);
	cursor_add(&cursor, t, false, NULL, 0, BackwardScanDirection);
	found = cursor.streams[0].at_row;
	if (found)
	{
		*first_id = stream_id(&cursor.streams[0]);
		*last_id = stream_id(&cursor.streams[1]);
	}
	cursor_close(&cursor);
	return found;
}

/*
 * Does log table t hold, as snapshot sees it, a row of one of the n
 * transactions xids?
 */
bool
outbox_log_table_holds(const OutboxExtension *ext, int t, Snapshot snapshot,
					   FullTransactionId *xids, int n)
{
	LogCursor	cursor;
	bool		found = false;

	cursor_open(&cursor, ext, snapshot, n, true);
	for (int i = 0; i < n && !found; i++)
	{
		ScanKeyData key;

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_XID8EQ,
					FullTransactionIdGetDatum(xids[i]));
		cursor_add(&cursor, t, true, &key, 1, ForwardScanDirection);
		found = cursor.streams[cursor.nstreams - 1].at_row;
	}
	cursor_close(&cursor);
	return found;
}

/* Refuse an array of ids that a caller could make up to mislead a scan. */
static void
check_ids(ArrayType *ids)
{
	if (ARR_NDIM(ids) > 1 || array_contains_nulls(ids))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ids must be a one-dimensional array without nulls")));
}

/*
 * Open cursor on the log rows of the given ids (a bigint[] datum) that the
 * active snapshot sees; false, with nothing opened, if there are none.
 */
static bool
cursor_open_ids(LogCursor *cursor, const OutboxExtension *ext, Datum ids)
{
	ArrayType  *array = DatumGetArrayTypeP(ids);

	check_ids(array);
	if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) == 0)
		return false;
	cursor_open(cursor, ext, GetActiveSnapshot(), OUTBOX_LOG_TABLES, true);
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		ScanKeyData key;

		ScanKeyEntryInitialize(&key, SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
							   INT8OID, InvalidOid, F_INT8EQ, PointerGetDatum(array));
		cursor_add(cursor, t, false, &key, 1, ForwardScanDirection);
	}
	return true;
}

/*
 * The log events of the given ids (a bigint[] datum) that the active
 * snapshot sees, in id order, in *events (palloc'd); returns how many.
 */
int
outbox_log_events(const OutboxExtension *ext, Datum ids, OutboxEvent **events)
{
	ArrayType  *array = DatumGetArrayTypeP(ids);
	LogCursor	cursor;
	int			n = 0;

	*events = palloc((ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) + 1) *
					 sizeof(OutboxEvent));
	if (!cursor_open_ids(&cursor, ext, ids))
		return 0;
	while (cursor_next(&cursor, &(*events)[n]))
		n++;
	cursor_close(&cursor);
	return n;
}

/*
 * An upper bound of the ids in the log that snapshot sees, 0 if it sees
 * none: the highest id of an index entry, whether its row is visible, in
 * progress or rolled back, read from the index alone, so that rows the
 * snapshot does not see at the end of a table cost nothing.
 */
static int64
log_max_id(const OutboxExtension *ext, Snapshot snapshot)
{
	LogCursor	cursor;
	int64		max_id = 0;

	cursor_open(&cursor, ext, snapshot, OUTBOX_LOG_TABLES, false);
	cursor.budget = 0;			/* keys from the index, dead entries too */
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		LogStream  *stream = cursor_scan(&cursor, t, false, NULL, 0);
		bool		isnull;

		if (index_getnext_tid(stream->scan, BackwardScanDirection) != NULL)
			max_id = Max(max_id, DatumGetInt64(index_getattr(stream->scan->xs_itup, 1,
															 stream->scan->xs_itupdesc,
															 &isnull)));
	}
	cursor_close(&cursor);
	return max_id;
}

/* What is counted of each unread event: its id, topic and creation time. */
typedef void (*UnreadVisitor) (void *arg, int64 id, Datum topic, TimestampTz created_at);

/* binary heap order of streams: the smallest id first */
static int
stream_order(Datum a, Datum b, void *arg)
{
	int64		ida = stream_id((LogStream *) DatumGetPointer(a));
	int64		idb = stream_id((LogStream *) DatumGetPointer(b));

	return ida < idb ? 1 : ida > idb ? -1 : 0;
}

/*
 * Visit the unread log events, as the active snapshot sees them, at most
 * limit of them: past last_id, of a running transaction, or of a draining
 * one and not read yet; in id order, but the rows of each of those
 * transactions together.  With a limit, at most UNREAD_SCAN_BUDGET index
 * entries are looked at.  Returns an upper bound of how many were not
 * visited (0 if all were).
 */
static int64
visit_unread(const OutboxExtension *ext, int64 limit, UnreadVisitor visit, void *arg)
{
	Snapshot	snapshot = GetActiveSnapshot();
	bool		bounded = limit < PG_INT64_MAX;
	OutboxReaderRow row;
	OutboxReader reader;
	LogCursor	cursor;
	binaryheap *heads;
	int			nrunning;
	int			ndraining;
	int64		visited = 0;
	int64		rest_from = PG_INT64_MAX;

	ItemPointerSetInvalid(&row.tid);
	outbox_reader_row_read(ext, snapshot, &row);
	reader = row.reader;

	/*
	 * The rows of a transaction that the snapshot sees as running are not
	 * seen: no scan for it (a bulk enqueue in progress would spend the
	 * budget on its invisible rows).
	 */
	nrunning = 0;
	for (int i = 0; i < reader.nrunning; i++)
		if (!XidInMVCCSnapshot(XidFromFullTransactionId(reader.running[i]), snapshot))
			reader.running[nrunning++] = reader.running[i];
	reader.nrunning = nrunning;

	nrunning = bounded ? Min(reader.nrunning, UNREAD_COUNT_MAX_XIDS) : reader.nrunning;
	ndraining = bounded ? Min(reader.ndraining, UNREAD_COUNT_MAX_XIDS - nrunning) :
		reader.ndraining;
	cursor_open(&cursor, ext, snapshot, OUTBOX_LOG_TABLES * 3, false);
	if (bounded)
		cursor.budget = UNREAD_SCAN_BUDGET;
	cursor_add_after(&cursor, reader.last_id);
	cursor_add_txid_set(&cursor, reader.running, nrunning, PG_INT64_MIN, reader.last_id);
	cursor_add_txid_set(&cursor, reader.draining, ndraining,
						reader.drain_after, reader.drain_upto);

	heads = binaryheap_allocate(cursor.nstreams, stream_order, NULL);
	for (int i = 0; i < cursor.nstreams; i++)
		if (cursor.streams[i].at_row)
			binaryheap_add_unordered(heads, PointerGetDatum(&cursor.streams[i]));
	binaryheap_build(heads);
	while (visited < limit && !cursor.exhausted && !binaryheap_empty(heads))
	{
		LogStream  *stream = (LogStream *) DatumGetPointer(binaryheap_first(heads));
		bool		isnull;

		visit(arg, stream_id(stream), slot_getattr(stream->slot, LOG_TOPIC + 1, &isnull),
			  DatumGetTimestampTz(slot_getattr(stream->slot, LOG_CREATED_AT + 1, &isnull)));
		visited++;
		stream_advance(&cursor, stream, ForwardScanDirection);
		if (stream->at_row)
			binaryheap_replace_first(heads, PointerGetDatum(stream));
		else
			binaryheap_remove_first(heads);
	}

	/*
	 * What was not visited has an id from the smallest that a scan may still
	 * hold up to the highest in the log: a scan's next row (the smallest id
	 * of its range if it reads by transaction), or where a scan stopped for
	 * want of budget, or where the rows of a transaction left out may
	 * start.
	 */
	for (int i = 0; i < cursor.nstreams; i++)
	{
		LogStream  *stream = &cursor.streams[i];

		if (stream->at_row && !stream->by_txid)
			rest_from = Min(rest_from, stream_id(stream));
		else if (stream->at_row || stream->stopped)
			rest_from = Min(rest_from, stream->seen_id);
	}
	if (nrunning < reader.nrunning)
		rest_from = 1;
	else if (ndraining < reader.ndraining)
		rest_from = Min(rest_from, reader.drain_after + 1);
	binaryheap_free(heads);
	cursor_close(&cursor);
	if (rest_from == PG_INT64_MAX)
		return 0;
	return Max(log_max_id(ext, snapshot) - rest_from + 1, 0);
}

/* outbox_count_unread: each event visited is counted */
static void
count_one(void *arg, int64 id, Datum topic, TimestampTz created_at)
{
	(*(int64 *) arg)++;
}

/*
 * How many log events the claim has not read yet, exactly, however many.
 */
int64
outbox_count_unread(const OutboxExtension *ext)
{
	int64		n = 0;

	visit_unread(ext, PG_INT64_MAX, count_one, &n);
	return n;
}

PG_FUNCTION_INFO_V1(outbox_in_progress);
PG_FUNCTION_INFO_V1(outbox_log_rows);
PG_FUNCTION_INFO_V1(outbox_unread_events);
PG_FUNCTION_INFO_V1(outbox_unread_topics);

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

	outbox_entry(fcinfo);
	if (!ActiveSnapshotSet())
		elog(ERROR, "outbox_in_progress() needs an active snapshot");
	/* the snapshot's next xid is not known: the one now is later, and safe */
	n = in_progress(GetActiveSnapshot(), ReadNextFullTransactionId(), &xids);
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
	const OutboxExtension *ext = outbox_entry(fcinfo);
	LogCursor	cursor;
	MemoryContext row_context;
	MemoryContext caller_context;
	OutboxEvent ev;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != OUTBOX_LOG_COLUMNS)
		elog(ERROR, "outbox_log_rows() is not declared as returning the log's rows");
	if (!cursor_open_ids(&cursor, ext, PG_GETARG_DATUM(0)))
		PG_RETURN_NULL();
	row_context = AllocSetContextCreate(CurrentMemoryContext, "outbox log row",
										ALLOCSET_DEFAULT_SIZES);
	caller_context = MemoryContextSwitchTo(row_context);
	while (cursor_next(&cursor, &ev))
	{
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, ev.values, ev.isnull);
		MemoryContextReset(row_context);
	}
	MemoryContextSwitchTo(caller_context);
	MemoryContextDelete(row_context);
	cursor_close(&cursor);
	PG_RETURN_NULL();
}

/* outbox_unread_events: each event visited is a row */
static void
put_event(void *arg, int64 id, Datum topic, TimestampTz created_at)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[3] = {Int64GetDatum(id), topic, TimestampTzGetDatum(created_at)};
	bool		isnull[3] = {false, false, false};

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
}

/*
 * outbox_unread_events(r outbox_reader)
 *		RETURNS TABLE (id bigint, topic text, created_at timestamptz)
 *
 * Of version 1.1, whose outbox_stats counts these rows.  The argument is
 * ignored: what is unread is what the reader row says now, not what a
 * caller makes up (a made-up row listed published events).  At most
 * UNREAD_COUNT_LIMIT rows.
 */
Datum
outbox_unread_events(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);

	InitMaterializedSRF(fcinfo, 0);
	if (((ReturnSetInfo *) fcinfo->resultinfo)->setDesc->natts != 3)
		elog(ERROR, "outbox_unread_events() is not declared as version 1.1 declares it");
	visit_unread(ext, UNREAD_COUNT_LIMIT, put_event, fcinfo->resultinfo);
	PG_RETURN_NULL();
}

/* a topic and what was counted of its unread events */
typedef struct TopicCount
{
	char		topic[OUTBOX_TOPIC_SIZE];
	Datum		topic_datum;
	int64		count;
	TimestampTz oldest;
} TopicCount;

/* outbox_unread_topics: each event visited counts for its topic */
static void
count_event(void *arg, int64 id, Datum topic, TimestampTz created_at)
{
	HTAB	   *counts = (HTAB *) arg;
	text	   *t = DatumGetTextPP(topic);
	char		key[sizeof(((TopicCount *) NULL)->topic)] = {0};
	TopicCount *entry;
	bool		found;

	memcpy(key, VARDATA_ANY(t), Min(VARSIZE_ANY_EXHDR(t), sizeof(key) - 1));
	entry = hash_search(counts, key, HASH_ENTER, &found);
	if (!found)
	{
		entry->topic_datum = PointerGetDatum(cstring_to_text(key));
		entry->count = 0;
		entry->oldest = created_at;
	}
	entry->count++;
	entry->oldest = Min(entry->oldest, created_at);
}

/*
 * outbox_unread_topics()
 *		RETURNS TABLE (topic text, unread bigint, oldest_created_at timestamptz)
 *
 * The log events the claim has not read yet, counted per topic, with the
 * creation time of the oldest.  At most UNREAD_COUNT_LIMIT are counted,
 * in id order; past that, a row with topic NULL gives an upper bound of
 * how many more there are.  Takes no input: it counts what the reader row
 * says is unread now, and needs no right on the log.
 */
Datum
outbox_unread_topics(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASHCTL		ctl;
	HTAB	   *counts;
	HASH_SEQ_STATUS status;
	TopicCount *entry;
	int64		left;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != 3)
		elog(ERROR, "outbox_unread_topics() is not declared as this library expects");
	ctl.keysize = sizeof(entry->topic);
	ctl.entrysize = sizeof(TopicCount);
	ctl.hcxt = CurrentMemoryContext;
	counts = hash_create("outbox unread topics", 64, &ctl,
						 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	left = visit_unread(ext, UNREAD_COUNT_LIMIT, count_event, counts);

	hash_seq_init(&status, counts);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[3] = {entry->topic_datum, Int64GetDatum(entry->count),
		TimestampTzGetDatum(entry->oldest)};
		bool		isnull[3] = {false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	if (left > 0)
	{
		Datum		values[3] = {0, Int64GetDatum(left), 0};
		bool		isnull[3] = {true, false, true};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
}
