/*-------------------------------------------------------------------------
 *
 * reader_row.c
 *		The row of outbox_reader, where the claim is in the log
 *		(OutboxReader): read and written with the table access methods, not
 *		with SQL, found at its ctid; and its xid8[] columns.  docs/design.md,
 *		"Storage: a log that publishing does not rewrite", says why.
 *
 * src/queue/reader_row.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "queue/reader_row.h"

/* the attribute number of column name of outbox_reader */
static AttrNumber
column_number(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
			return i + 1;
	elog(ERROR, "column \"%s\" of outbox_reader does not exist", name);
	return InvalidAttrNumber;	/* keep compiler quiet */
}

/* A copy of the xids of a reader, for comparing it later. */
static void
copy_reader(OutboxReader *to, const OutboxReader *from)
{
	*to = *from;
	to->running = palloc((from->nrunning + 1) * sizeof(FullTransactionId));
	memcpy(to->running, from->running, from->nrunning * sizeof(FullTransactionId));
	to->draining = palloc((from->ndraining + 1) * sizeof(FullTransactionId));
	memcpy(to->draining, from->draining, from->ndraining * sizeof(FullTransactionId));
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
 * Read the reader row into row as snapshot sees it: at row->tid if that
 * version is the one it sees, else wherever a scan finds it; row->tid
 * then says where it is.  No permission is checked: monitoring counts
 * unread events without any right on the tables.
 */
void
outbox_reader_row_read(const OutboxExtension *ext, Snapshot snapshot,
					   OutboxReaderRow *row)
{
	Relation	rel = table_open(outbox_relation(ext, "outbox_reader"), AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	bool		found = false;
	bool		isnull;

	/* the table may have been rewritten or truncated since */
	if (ItemPointerIsValid(&row->tid) &&
		ItemPointerGetBlockNumber(&row->tid) < RelationGetNumberOfBlocks(rel))
	{
		Buffer		buffer = ReadBuffer(rel, ItemPointerGetBlockNumber(&row->tid));

		/* what a scan does on its way: prune the page's dead versions */
		heap_page_prune_opt(rel, buffer);
		ReleaseBuffer(buffer);
		found = table_tuple_fetch_row_version(rel, &row->tid, snapshot, slot);
	}
	if (!found)
	{
		TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);

		found = table_scan_getnextslot(scan, ForwardScanDirection, slot);
		/* the slot points at the scan's tuple, which table_endscan frees */
		if (found)
			ExecMaterializeSlot(slot);
		table_endscan(scan);
	}
	if (!found)
		elog(ERROR, "outbox reader row not found");

	ItemPointerCopy(&slot->tts_tid, &row->tid);
	row->reader.last_id = DatumGetInt64(slot_getattr(slot, column_number(desc, "last_id"),
													 &isnull));
	row->reader.nrunning = outbox_xids_of(slot_getattr(slot, column_number(desc, "running"),
													   &isnull),
										  &row->reader.running);
	row->reader.ndraining = outbox_xids_of(slot_getattr(slot, column_number(desc, "draining"),
														&isnull),
										   &row->reader.draining);
	row->reader.drain_upto = DatumGetInt64(slot_getattr(slot, column_number(desc, "drain_upto"),
														&isnull));
	row->reader.drain_after = DatumGetInt64(slot_getattr(slot, column_number(desc, "drain_after"),
														 &isnull));
	row->current_log = DatumGetInt32(slot_getattr(slot, column_number(desc, "current_log"),
												  &isnull));
	row->current_since = DatumGetTimestampTz(slot_getattr(slot, column_number(desc, "current_since"),
														  &isnull));
	copy_reader(&row->saved, &row->reader);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
}

/* Does the reader of row say anything else than what was read of it? */
bool
outbox_reader_moved(const OutboxReaderRow *row)
{
	const OutboxReader *a = &row->reader;
	const OutboxReader *b = &row->saved;

	return a->last_id != b->last_id ||
		a->drain_upto != b->drain_upto || a->drain_after != b->drain_after ||
		a->nrunning != b->nrunning || a->ndraining != b->ndraining ||
		memcmp(a->running, b->running, a->nrunning * sizeof(FullTransactionId)) != 0 ||
		memcmp(a->draining, b->draining, a->ndraining * sizeof(FullTransactionId)) != 0;
}

/*
 * Add the index entries of the new version in slot of a row of rel, with
 * no uniqueness check: the row is the table's only one, written under the
 * claim lock, and the check would visit every version of it that a
 * snapshot held elsewhere keeps (each update that is not HOT adds an entry
 * of the same key).
 */
static void
insert_index_entries(Relation rel, TupleTableSlot *slot, EState *estate)
{
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	ExprContext *econtext = GetPerTupleExprContext(estate);

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	index = rri->ri_IndexRelationDescs[i];
		IndexInfo  *info = rri->ri_IndexRelationInfo[i];
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		if (info->ii_Predicate != NIL &&
			!ExecQual(ExecPrepareQual(info->ii_Predicate, estate), econtext))
			continue;
		FormIndexDatum(info, slot, estate, values, isnull);
		index_insert(index, values, isnull, &slot->tts_tid, rel,
					 UNIQUE_CHECK_NO, false, info);
	}
	ExecCloseIndices(rri);
}

/*
 * Write row over the version of the reader row at row->tid, which this
 * transaction read under the claim lock; row->tid gets where the new
 * version is, which the next command sees.
 */
void
outbox_reader_row_write(const OutboxExtension *ext, OutboxReaderRow *row)
{
	Relation	rel = table_open(outbox_relation(ext, "outbox_reader"), RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	EState	   *estate = CreateExecutorState();
	MemoryContext caller_cxt = MemoryContextSwitchTo(estate->es_query_cxt);
	TupleTableSlot *old = table_slot_create(rel, &estate->es_tupleTable);
	TupleTableSlot *new = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	bool		update_indexes;

	if (!table_tuple_fetch_row_version(rel, &row->tid, SnapshotAny, old))
		elog(ERROR, "outbox reader row not found");
	slot_getallattrs(old);
	ExecClearTuple(new);
	memcpy(new->tts_values, old->tts_values, desc->natts * sizeof(Datum));
	memcpy(new->tts_isnull, old->tts_isnull, desc->natts * sizeof(bool));
	new->tts_values[column_number(desc, "last_id") - 1] = Int64GetDatum(row->reader.last_id);
	new->tts_values[column_number(desc, "running") - 1] =
		outbox_xid_array(row->reader.running, row->reader.nrunning);
	new->tts_values[column_number(desc, "draining") - 1] =
		outbox_xid_array(row->reader.draining, row->reader.ndraining);
	new->tts_values[column_number(desc, "drain_upto") - 1] = Int64GetDatum(row->reader.drain_upto);
	new->tts_values[column_number(desc, "drain_after") - 1] = Int64GetDatum(row->reader.drain_after);
	new->tts_values[column_number(desc, "current_log") - 1] = Int32GetDatum(row->current_log);
	new->tts_values[column_number(desc, "current_since") - 1] =
		TimestampTzGetDatum(row->current_since);
	ExecStoreVirtualTuple(new);

	simple_table_tuple_update(rel, &row->tid, new, GetActiveSnapshot(), &update_indexes);
	if (update_indexes)
		insert_index_entries(rel, new, estate);
	ItemPointerCopy(&new->tts_tid, &row->tid);
	MemoryContextSwitchTo(caller_cxt);
	copy_reader(&row->saved, &row->reader);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	CommandCounterIncrement();
}
