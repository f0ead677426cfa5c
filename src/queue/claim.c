/*-------------------------------------------------------------------------
 *
 * claim.c
 *		Claim a batch of due events: the due events of the retry table, then
 *		the next events of the log; the claim lock, the in-memory count of
 *		claimed events not yet recorded and its pre-commit check.  One SPI
 *		session; every function runs in a transaction with an active
 *		snapshot.  docs/design.md, "The claim", says why.
 *
 * src/queue/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/sinvaladt.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "queue/claim.h"
#include "queue/reader.h"
#include "queue/reader_row.h"

/* the claim lock: a sub-object of the extension that no catalog object has */
#define CLAIM_LOCK_SUBID 1

/* where this backend last saw the reader row, of which relation */
static Oid	reader_relid = InvalidOid;
static ItemPointerData reader_tid;

/*
 * The due events of the retry table, as the columns of the log: each only
 * if every earlier unfinished event of its key is claimed with it; none of
 * the ids $2, in flight in this transaction already, nor of the topics $3,
 * whose cluster is down.
 */
static OutboxPlan retries_plan = {
	"WITH claimed AS MATERIALIZED ("
	"  SELECT m.id, m.event_id, m.topic, m.key, m.payload, m.headers, m.created_at"
	"    FROM %1$s.outbox_retries m"
	"   WHERE m.status IN ('pending', 'failed')"
	"     AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())"
	"     AND m.id <> ALL ($2) AND m.topic <> ALL ($3)"
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
	" SELECT c.id, NULL::xid8, c.event_id, c.topic, c.key, c.payload, c.headers, c.created_at"
	"   FROM claimed c"
	"  WHERE NOT EXISTS (SELECT FROM held_back h"
	"                     WHERE h.topic = c.topic AND h.key = c.key AND h.first_id < c.id)"
	"  ORDER BY c.id",
	3, {INT4OID, INT8ARRAYOID, TEXTARRAYOID}
};

/*
 * Of log events ($1 ids, $2 topics, $3 keys; ids from $4 to $5), those in
 * the retry table already (recorded after a failed batch), and those whose
 * key has an unfinished event there: by position, and whether it is
 * there.  Nothing is looked up per event while the retry table has
 * neither.  The hash of the key is what the retry table's index holds.
 */
static OutboxPlan held_plan = {
	"SELECT u.i::integer, EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id = u.id)"
	"  FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY AS u(id, topic, key, i)"
	" WHERE (EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id BETWEEN $4 AND $5)"
	"        OR EXISTS (SELECT FROM %1$s.outbox_retries h"
	"                    WHERE h.status IN ('pending', 'failed') AND h.key IS NOT NULL))"
	"   AND (EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id = u.id)"
	"        OR (u.key IS NOT NULL"
	"            AND EXISTS (SELECT FROM %1$s.outbox_retries h"
	"                         WHERE h.topic = u.topic"
	"                           AND hashtextextended(h.key, 0) = hashtextextended(u.key, 0)"
	"                           AND h.key = u.key"
	"                           AND h.status IN ('pending', 'failed'))))",
	5, {INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID, INT8OID}
};

/* log events into the retry table, due, unless they are there already */
static OutboxPlan copy_plan = {
	"INSERT INTO %1$s.outbox_retries (id, event_id, topic, key, payload, headers, created_at)"
	" SELECT u.id, u.event_id, u.topic, u.key, u.payload, u.headers, u.created_at"
	"   FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::bytea[],"
	"               $6::jsonb[], $7::timestamptz[])"
	"        AS u(id, event_id, topic, key, payload, headers, created_at)"
	"  WHERE NOT EXISTS (SELECT FROM %1$s.outbox_retries m WHERE m.id = u.id)"
	"  ORDER BY u.id",
	7, {INT8ARRAYOID, UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, BYTEAARRAYOID,
	JSONBARRAYOID, TIMESTAMPTZARRAYOID}
};

/*
 * Version 1.1: the reader row moved on, with $6 more log events whose
 * outcome is due, which its commit-time trigger counts.
 */
static OutboxPlan save_plan_1_1 = {
	"UPDATE %1$s.outbox_reader SET last_id = $1, running = $2, draining = $3,"
	" drain_upto = $4, drain_after = $5, unrecorded = unrecorded + $6",
	6, {INT8OID, XID8ARRAYOID, XID8ARRAYOID, INT8OID, INT8OID, INT8OID}
};

/*
 * The claim's test of due events but for the log past last_id:
 * transactions that ended since they were running, due events of the
 * retry table.
 */
static OutboxPlan retries_due_plan = {
	"SELECT EXISTS (SELECT FROM %1$s.outbox_retries m"
	"               WHERE m.status IN ('pending', 'failed')"
	"               AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now()))"
};

/*
 * May a backend of role roleid hold version 1.1's advisory lock on the
 * reader for the extension: a superuser, or a role that may run the
 * function of 1.1 that takes it (outbox_lock_reader(boolean), which 1.1's
 * outbox_abandon() and outbox_rotate() call)?  Any other role that holds
 * it took it to stop the claim.
 */
static bool
may_hold_reader_1_1(const OutboxExtension *ext, Oid roleid)
{
	Oid			argtypes[1] = {BOOLOID};
	Oid			fn;

	if (superuser_arg(roleid))
		return true;
	fn = LookupFuncName(list_make2(makeString(get_namespace_name(ext->schema)),
								   makeString("outbox_lock_reader")),
						1, argtypes, true);
	return OidIsValid(fn) && pg_proc_aclcheck(fn, roleid, ACL_EXECUTE) == ACLCHECK_OK;
}

/*
 * Take version 1.1's advisory lock on the reader, which its functions
 * take: waiting for it, or not.  Returns whether the claim may go on: with
 * the lock, or without it while only backends that could not have taken
 * it for the extension hold it (may_hold_reader_1_1), for any role can
 * take an advisory lock, and none may stop publishing with it.
 */
static bool
lock_reader_1_1(const OutboxExtension *ext, bool wait)
{
	Datum		key1 = DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID,
											   CStringGetTextDatum("outbox_claim"));
	Datum		key2 = Int32GetDatum((int32) outbox_relation(ext, "outbox_reader"));
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) DatumGetInt32(key1),
						 (uint32) DatumGetInt32(key2), 2);
	for (;;)
	{
		VirtualTransactionId *holders;
		int			nholders;
		bool		held_for_extension = false;

		if (DatumGetBool(DirectFunctionCall2(pg_try_advisory_xact_lock_int4, key1, key2)))
			return true;
		holders = GetLockConflicts(&tag, ExclusiveLock, &nholders);
		for (int i = 0; i < nholders && !held_for_extension; i++)
		{
			PGPROC	   *proc = BackendIdGetProc(holders[i].backendId);

			held_for_extension = proc != NULL && may_hold_reader_1_1(ext, proc->roleId);
		}
		if (!held_for_extension)
			return true;
		if (!wait)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Read the reader row (table relid) as snapshot sees it, starting where
 * this backend last saw it.
 */
static void
read_reader(const OutboxExtension *ext, Oid relid, Snapshot snapshot,
			OutboxReaderRow *row)
{
	ItemPointerSetInvalid(&row->tid);
	if (reader_relid == relid)
		ItemPointerCopy(&reader_tid, &row->tid);
	outbox_reader_row_read(ext, snapshot, row);
}

/*
 * Take the claim lock until the end of the transaction and read the reader
 * row into row: waiting for another holder, or, unless wait, returning
 * false at once if there is one.  The caller needs UPDATE on the table,
 * and is connected to SPI.
 */
bool
outbox_lock_reader(const OutboxExtension *ext, bool wait, OutboxReaderRow *row)
{
	Oid			relid;
	AclResult	acl;

	/* what follows finds the extension's tables by name in its schema */
	outbox_check_schema(ext);
	relid = outbox_relation(ext, "outbox_reader");
	acl = pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE);

	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, get_rel_name(relid));
	if (wait)
		LockDatabaseObject(ExtensionRelationId, ext->oid, CLAIM_LOCK_SUBID, ExclusiveLock);
	else if (!ConditionalLockDatabaseObject(ExtensionRelationId, ext->oid,
											CLAIM_LOCK_SUBID, ExclusiveLock))
		return false;
	if (ext->version < OUTBOX_VERSION(1, 2) && !lock_reader_1_1(ext, wait))
		return false;

	/* a snapshot taken now sees what the lock's last holder committed */
	read_reader(ext, relid, GetTransactionSnapshot(), row);
	reader_relid = relid;
	ItemPointerCopy(&row->tid, &reader_tid);
	return true;
}

/*
 * Write the reader row, and note where it is now for the next claim.  The
 * caller holds the claim lock.
 */
void
outbox_write_reader(const OutboxExtension *ext, OutboxReaderRow *row)
{
	outbox_reader_row_write(ext, row);
	ItemPointerCopy(&row->tid, &reader_tid);
}

/*
 * Save the reader of row, if it moved, and count nread more log events
 * whose outcome is due.  The caller is connected to SPI and holds the
 * claim lock.
 */
void
outbox_save_reader(const OutboxExtension *ext, OutboxReaderRow *row, int nread)
{
	OutboxReader *reader = &row->reader;
	Datum		values[6];

	if (ext->version >= OUTBOX_VERSION(1, 2))
	{
		outbox_count_unrecorded(nread);
		if (outbox_reader_moved(row))
			outbox_write_reader(ext, row);
		return;
	}
	if (!outbox_reader_moved(row) && nread == 0)
		return;
	values[0] = Int64GetDatum(reader->last_id);
	values[1] = outbox_xid_array(reader->running, reader->nrunning);
	values[2] = outbox_xid_array(reader->draining, reader->ndraining);
	values[3] = Int64GetDatum(reader->drain_upto);
	values[4] = Int64GetDatum(reader->drain_after);
	values[5] = Int64GetDatum(nread);
	outbox_run(ext, &save_plan_1_1, values, 1);
	/* the row moved where this backend did not see it go */
	reader_relid = InvalidOid;
}

/*
 * Log events claimed by this transaction whose outcome is not recorded
 * yet, and, for each subtransaction that changed the count, what it was
 * before (innermost first): a claim or a record rolled back to a savepoint
 * takes its count back with it.
 */
typedef struct SubxactCount
{
	SubTransactionId subxact;
	int64		before;
	struct SubxactCount *next;
} SubxactCount;

static int64 unrecorded = 0;
static SubxactCount *subxact_counts = NULL;

/*
 * The events that outbox_claim() returned in this transaction and that
 * are not recorded yet, by id, in TopTransactionContext: outbox_mark_*()
 * take them from here instead of reading them again, and a later
 * outbox_claim() does not claim them again.
 */
typedef struct ClaimedEvent
{
	int64		id;
	OutboxEvent *event;
} ClaimedEvent;

static HTAB *sql_claimed = NULL;

/* the end of the transaction; its memory goes with it */
static void
forget_counts(void)
{
	unrecorded = 0;
	subxact_counts = NULL;
	sql_claimed = NULL;
}

static void
unrecorded_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (unrecorded != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("events claimed by outbox_claim() were not recorded"),
						 errhint("Record each claimed event with outbox_mark_published(), outbox_mark_failed() or outbox_mark_released() in the transaction that claimed it.")));
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			forget_counts();
			break;
		default:
			break;
	}
}

static void
unrecorded_subxact_callback(SubXactEvent event, SubTransactionId subxact,
							SubTransactionId parent, void *arg)
{
	SubxactCount *top = subxact_counts;

	/* a claim rolled back is no claim: read its events again if need be */
	if (event == SUBXACT_EVENT_ABORT_SUB)
		sql_claimed = NULL;
	if (top == NULL || top->subxact != subxact ||
		(event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		unrecorded = top->before;
	else if (parent != TopSubTransactionId &&
			 (top->next == NULL || top->next->subxact != parent))
	{
		/* the change of a committed subtransaction is now its parent's */
		top->subxact = parent;
		return;
	}
	subxact_counts = top->next;
}

/*
 * Count n more claimed log events (n < 0: recorded ones) of this
 * transaction; its commit fails unless the count is back to 0.  Not for a
 * database at version 1.1, whose reader row counts them.
 */
/* Have the callbacks above called, once per process. */
static void
register_callbacks(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(unrecorded_xact_callback, NULL);
		RegisterSubXactCallback(unrecorded_subxact_callback, NULL);
		registered = true;
	}
}

void
outbox_count_unrecorded(int64 n)
{
	SubTransactionId subxact = GetCurrentSubTransactionId();

	if (n == 0)
		return;
	register_callbacks();
	if (subxact != TopSubTransactionId &&
		(subxact_counts == NULL || subxact_counts->subxact != subxact))
	{
		SubxactCount *count = MemoryContextAlloc(TopTransactionContext,
												 sizeof(SubxactCount));

		count->subxact = subxact;
		count->before = unrecorded;
		count->next = subxact_counts;
		subxact_counts = count;
	}
	unrecorded = Max(unrecorded + n, 0);
}

/*
 * Keep the events of batch, claimed by outbox_claim() and allocated in
 * TopTransactionContext, for outbox_claimed_event().
 */
static void
keep_claimed(OutboxBatch *batch)
{
	register_callbacks();
	if (sql_claimed == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(ClaimedEvent);
		ctl.hcxt = TopTransactionContext;
		sql_claimed = hash_create("outbox claimed events", Max(batch->count, 16), &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	for (int i = 0; i < batch->count; i++)
	{
		ClaimedEvent *entry = hash_search(sql_claimed, &batch->events[i].id,
										  HASH_ENTER, NULL);

		entry->event = &batch->events[i];
	}
}

/*
 * The event of the given id that outbox_claim() returned in this
 * transaction, not recorded yet, or NULL; with forget, it is recorded now.
 */
OutboxEvent *
outbox_claimed_event(int64 id, bool forget)
{
	ClaimedEvent *entry;

	if (sql_claimed == NULL ||
		(entry = hash_search(sql_claimed, &id, HASH_FIND, NULL)) == NULL)
		return NULL;
	if (forget)
		hash_search(sql_claimed, &id, HASH_REMOVE, NULL);
	return entry->event;
}

/* The events outbox_claim() returned in this transaction, not recorded yet. */
static OutboxBatch *
claimed_batch(void)
{
	OutboxBatch *batch = palloc0(sizeof(OutboxBatch));
	HASH_SEQ_STATUS status;
	ClaimedEvent *entry;

	if (sql_claimed == NULL)
		return batch;
	batch->events = palloc((hash_get_num_entries(sql_claimed) + 1) * sizeof(OutboxEvent));
	hash_seq_init(&status, sql_claimed);
	while ((entry = hash_seq_search(&status)) != NULL)
		batch->events[batch->count++] = *entry->event;
	return batch;
}

/*
 * Does the retry table hold, as a snapshot taken now sees it, an entry of
 * its index named index (whose first column is the id) with an id from
 * first to last (any id if last < first)?  One look at an index, where the
 * claim's statements for the retry table would start an executor each,
 * for nothing in most claims.  No permission is checked: the caller has
 * the claim lock, or is the worker.
 */
static bool
retries_hold(const OutboxExtension *ext, const char *index, int64 first, int64 last)
{
	Relation	rel = table_open(outbox_relation(ext, "outbox_retries"), AccessShareLock);
	Relation	idx = index_open(outbox_relation(ext, index), AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	ScanKeyData keys[2];
	int			nkeys = 0;
	IndexScanDesc scan;
	bool		found;

	if (first <= last)
	{
		ScanKeyInit(&keys[nkeys++], 1, BTGreaterEqualStrategyNumber, F_INT8GE,
					Int64GetDatum(first));
		ScanKeyInit(&keys[nkeys++], 1, BTLessEqualStrategyNumber, F_INT8LE,
					Int64GetDatum(last));
	}
	scan = index_beginscan(rel, idx, snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Claim the due events of the retry table into events, at most room of
 * them, none of the ids in_flight (a bigint[] datum) nor of the topics
 * held (a text[] datum), while their bytes
 * stay below *bytes_left (reduced by what they take); copies in memory
 * context cxt.  Returns how many.
 */
static int
claim_retries(const OutboxExtension *ext, int room, Datum in_flight, Datum held,
			  int64 *bytes_left, OutboxEvent *events, MemoryContext cxt)
{
	Datum		values[3] = {Int32GetDatum(room), in_flight, held};
	MemoryContext spi_cxt;
	int			n = 0;

	outbox_run(ext, &retries_plan, values, -1);
	spi_cxt = MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed && *bytes_left > 0; i++)
	{
		Datum		row[OUTBOX_LOG_COLUMNS];
		bool		isnull[OUTBOX_LOG_COLUMNS];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, isnull);
		outbox_event_store(&events[n], SPI_tuptable->tupdesc, row, isnull);
		*bytes_left -= events[n++].bytes;
	}
	MemoryContextSwitchTo(spi_cxt);
	return n;
}

/* Column c of n events, as an array of type. */
static Datum
column_array(OutboxEvent **events, int n, OutboxLogColumn c, Oid type)
{
	Datum	   *values = palloc((n + 1) * sizeof(Datum));
	bool	   *isnull = palloc((n + 1) * sizeof(bool));

	for (int i = 0; i < n; i++)
	{
		values[i] = events[i]->values[c];
		isnull[i] = events[i]->isnull[c];
	}
	return outbox_array(values, isnull, n, type);
}

/*
 * Copy n log events into the retry table, due, unless they are there
 * already; returns how many it copied.  The caller is connected to SPI.
 */
int
outbox_copy_to_retries(const OutboxExtension *ext, OutboxEvent **events, int n)
{
	static const struct
	{
		OutboxLogColumn column;
		Oid			type;
	}			columns[7] = {
		{LOG_ID, INT8OID}, {LOG_EVENT_ID, UUIDOID}, {LOG_TOPIC, TEXTOID},
		{LOG_KEY, TEXTOID}, {LOG_PAYLOAD, BYTEAOID}, {LOG_HEADERS, JSONBOID},
		{LOG_CREATED_AT, TIMESTAMPTZOID}
	};
	Datum		values[7];

	if (n == 0)
		return 0;
	for (int c = 0; c < 7; c++)
		values[c] = column_array(events, n, columns[c].column, columns[c].type);
	return (int) outbox_run(ext, &copy_plan, values, -1);
}

/*
 * Of the n log events of events, keep those to send now: not those in the
 * retry table already (recorded after a failed batch), and not those whose
 * key has an unfinished event there, which are copied there to wait their
 * turn (*held_back if any).  Returns how many are kept, moved to the front
 * of events.
 */
static int
hold_back(const OutboxExtension *ext, OutboxEvent *events, int n, bool *held_back)
{
	OutboxEvent **all = palloc(n * sizeof(OutboxEvent *));
	OutboxEvent **held = palloc(n * sizeof(OutboxEvent *));
	bool	   *skip = palloc0(n * sizeof(bool));
	Datum		values[5];
	int			nheld = 0;
	int			kept = 0;

	for (int i = 0; i < n; i++)
		all[i] = &events[i];
	values[0] = column_array(all, n, LOG_ID, INT8OID);
	values[1] = column_array(all, n, LOG_TOPIC, TEXTOID);
	values[2] = column_array(all, n, LOG_KEY, TEXTOID);
	values[3] = Int64GetDatum(events[0].id);
	values[4] = Int64GetDatum(events[n - 1].id);
	outbox_run(ext, &held_plan, values, -1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		bool		isnull;
		int			i = DatumGetInt32(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull)) - 1;

		skip[i] = true;
		if (!DatumGetBool(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull)))
			held[nheld++] = &events[i];
	}
	outbox_copy_to_retries(ext, held, nheld);
	*held_back = nheld > 0;
	for (int i = 0; i < n; i++)
		if (!skip[i])
			events[kept++] = events[i];
	return kept;
}

static int
event_id_cmp(const void *a, const void *b)
{
	int64		x = ((const OutboxEvent *) a)->id;
	int64		y = ((const OutboxEvent *) b)->id;

	return (x > y) - (x < y);
}

/*
 * Claim up to batch_size due events, and at most about max_bytes of them
 * (at least one), for this transaction, in id order: first the due events
 * of the retry table, locked until the end of the transaction; then the
 * next events of the log, which the reader row moves past.  The events of
 * in_flight (NULL for none), claimed earlier in this transaction and not
 * recorded yet, are not claimed again, and hold back the later events of
 * their keys; nor are the events of the retry table of the topics held
 * (a list of names: their cluster is down).  Every log event claimed must be recorded (record.c) before
 * the transaction commits.  One claim runs at a time: a second claimer
 * gets nothing until the first ends.  batch->full says that the claim
 * stopped at its limits, and more may be due; batch->held_back that it
 * moved events to the retry table, due once the batch is recorded.  The
 * batch is allocated in the caller's memory context.
 */
OutboxBatch *
outbox_claim_batch(const OutboxExtension *ext, int batch_size, int64 max_bytes,
				   const OutboxBatch *in_flight, List *held)
{
	MemoryContext cxt = CurrentMemoryContext;
	OutboxBatch *batch = palloc0(sizeof(OutboxBatch));
	int64		bytes_left = max_bytes;
	OutboxReaderRow row;
	int			nin_flight = in_flight ? in_flight->count : 0;
	Datum	   *in_flight_ids = palloc((nin_flight + 1) * sizeof(Datum));
	Datum	   *held_topics = palloc((list_length(held) + 1) * sizeof(Datum));
	int			nheld = 0;
	ListCell   *lc;

	/* up to batch_size: as many as one allocation can hold */
	batch_size = Min(batch_size, (int) (MaxAllocSize / sizeof(OutboxEvent)) - 1);
	batch->events = palloc((Max(batch_size, 0) + 1) * sizeof(OutboxEvent));
	for (int i = 0; i < nin_flight; i++)
		in_flight_ids[i] = Int64GetDatum(in_flight->events[i].id);
	foreach(lc, held)
		held_topics[nheld++] = CStringGetTextDatum(lfirst(lc));

	SPI_connect();
	if (batch_size > 0 && outbox_lock_reader(ext, false, &row))
	{
		bool		unfinished;
		int			nretried = 0;
		int			nlog;
		MemoryContext spi_cxt;

		/* this transaction's own writes to the retry table count */
		CommandCounterIncrement();
		unfinished = retries_hold(ext, "outbox_retries_due", 0, -1);
		if (unfinished)
			nretried = claim_retries(ext, batch_size,
									 outbox_array(in_flight_ids, NULL, nin_flight, INT8OID),
									 outbox_array(held_topics, NULL, nheld, TEXTOID),
									 &bytes_left, batch->events, cxt);
		spi_cxt = MemoryContextSwitchTo(cxt);
		nlog = outbox_read_log(ext, &row.reader, batch_size - nretried,
							   &bytes_left, batch->events + nretried);
		MemoryContextSwitchTo(spi_cxt);
		batch->full = nretried + nlog >= batch_size || bytes_left <= 0;
		if (nlog > 0 &&
			(unfinished ||
			 retries_hold(ext, "outbox_retries_pkey", batch->events[nretried].id,
						  batch->events[nretried + nlog - 1].id)))
			nlog = hold_back(ext, batch->events + nretried, nlog, &batch->held_back);
		outbox_save_reader(ext, &row, nlog);
		batch->count = nretried + nlog;
	}
	SPI_finish();

	qsort(batch->events, batch->count, sizeof(OutboxEvent), event_id_cmp);
	for (int i = 0; i < batch->count; i++)
		outbox_event_unpack(&batch->events[i], i > 0 ? &batch->events[i - 1] : NULL);
	return batch;
}

/*
 * Are events of the log or the retry table waiting: due ones, or (unless
 * due) any not delivered, by the reader row read where the claim left it
 * (under a snapshot held elsewhere, a scan of its table would read every
 * version of it)?  A transaction that the claim saw running and that has
 * ended since may have left events; one still running wakes the worker
 * when it commits (utility.c), and keeps DROP DATABASE from running.  The
 * retry table's undelivered events are the entries of its index of due
 * events (a look at an index, not a statement).  Takes a connection to
 * SPI for due ones.
 */
static bool
events_waiting(const OutboxExtension *ext, bool due)
{
	Snapshot	snapshot = GetActiveSnapshot();
	OutboxReaderRow row;
	bool		isnull;
	bool		waiting;

	outbox_lock_reader_table(ext, AccessShareLock);
	read_reader(ext, outbox_relation(ext, "outbox_reader"), snapshot, &row);
	if (row.reader.ndraining > 0)
		return true;
	for (int i = 0; i < row.reader.nrunning; i++)
		if (!XidInMVCCSnapshot(XidFromFullTransactionId(row.reader.running[i]), snapshot))
			return true;

	if (due)
	{
		SPI_connect();
		waiting = DatumGetBool(outbox_run_value(ext, &retries_due_plan, NULL, &isnull));
		SPI_finish();
	}
	else
		waiting = retries_hold(ext, "outbox_retries_due", 0, -1);
	return waiting || outbox_log_has_after(ext, row.reader.last_id);
}

/*
 * Is any event due?  Far cheaper than a claim that finds nothing: what an
 * idle worker runs at each turn (each wake, or every outbox.poll_interval).
 */
bool
outbox_events_due(const OutboxExtension *ext)
{
	return events_waiting(ext, true);
}

/*
 * May any event be undelivered: due or not (a backoff), in the log or the
 * retry table?  As cheap as outbox_events_due: what DROP DATABASE is told
 * (launcher.c), and what an idle worker asks before it parks.
 */
bool
outbox_events_undelivered(const OutboxExtension *ext)
{
	return events_waiting(ext, false);
}

PG_FUNCTION_INFO_V1(outbox_claim);

/*
 * outbox_claim(batch_size integer, max_bytes bigint)
 *		RETURNS TABLE (id bigint, event_id uuid, topic text, key text,
 *					   payload bytea, headers jsonb)
 *
 * The claim of the worker, for SQL: see outbox_claim_batch.  The events it
 * returns are kept until they are recorded or the transaction ends, so
 * that recording them reads nothing again, and so that a second claim in
 * the transaction does not take them again.  Refused in a
 * transaction whose snapshot is older than its first statement.
 */
Datum
outbox_claim(PG_FUNCTION_ARGS)
{
	static const int columns[6] = {LOG_ID, LOG_EVENT_ID, LOG_TOPIC, LOG_KEY,
	LOG_PAYLOAD, LOG_HEADERS};
	const OutboxExtension *ext = outbox_entry(fcinfo);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		batch_size = PG_GETARG_INT32(0);
	OutboxBatch *batch;

	if (batch_size < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must not be negative")));
	outbox_require_read_committed("outbox_claim()");
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != lengthof(columns))
		elog(ERROR, "outbox_claim() is not declared as this library expects");
	{
		MemoryContext cxt = MemoryContextSwitchTo(TopTransactionContext);
		OutboxBatch *in_flight = claimed_batch();

		batch = outbox_claim_batch(ext, batch_size, PG_GETARG_INT64(1), in_flight, NIL);
		keep_claimed(batch);
		MemoryContextSwitchTo(cxt);
	}
	for (int i = 0; i < batch->count; i++)
	{
		Datum		values[lengthof(columns)];
		bool		isnull[lengthof(columns)];

		for (int c = 0; c < lengthof(columns); c++)
		{
			values[c] = batch->events[i].values[columns[c]];
			isnull[c] = batch->events[i].isnull[columns[c]];
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	PG_RETURN_NULL();
}
