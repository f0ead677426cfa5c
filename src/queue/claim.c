/*-------------------------------------------------------------------------
 *
 * claim.c
 *		Claim a batch of due events: the due events of the retry table, then
 *		the next events of the log; the claim lock and the reader row.  One
 *		SPI session; every function runs in a transaction with an active
 *		snapshot.  docs/design.md, "The claim", says why.
 *
 * src/queue/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
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
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "queue/claim.h"
#include "queue/reader.h"
#include "queue/reader_row.h"
#include "queue/retries.h"

/* the claim lock: a sub-object of the extension that no catalog object has */
#define CLAIM_LOCK_SUBID 1

/* where this backend last saw the reader row, of which relation */
static Oid	reader_relid = InvalidOid;
static ItemPointerData reader_tid;

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
		unfinished = outbox_retries_unfinished(ext);
		if (unfinished)
			nretried = outbox_retries_claim(ext, batch_size,
											outbox_array(in_flight_ids, NULL, nin_flight,
														 INT8OID),
											outbox_array(held_topics, NULL, nheld, TEXTOID),
											&bytes_left, batch->events, cxt);
		spi_cxt = MemoryContextSwitchTo(cxt);
		nlog = outbox_read_log(ext, &row.reader, batch_size - nretried,
							   &bytes_left, batch->events + nretried);
		MemoryContextSwitchTo(spi_cxt);
		batch->full = nretried + nlog >= batch_size || bytes_left <= 0;
		if (nlog > 0 &&
			(unfinished ||
			 outbox_retries_between(ext, batch->events[nretried].id,
									batch->events[nretried + nlog - 1].id)))
			nlog = outbox_retries_hold_back(ext, batch->events + nretried, nlog,
											&batch->held_back);
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
	bool		waiting;

	outbox_lock_reader_table(ext, AccessShareLock);
	read_reader(ext, outbox_relation(ext, "outbox_reader"), snapshot, &row);
	if (row.reader.ndraining > 0)
		return true;
	for (int i = 0; i < row.reader.nrunning; i++)
		if (!XidInMVCCSnapshot(XidFromFullTransactionId(row.reader.running[i]), snapshot))
			return true;

	if (due)
		waiting = outbox_retries_due(ext);
	else
		waiting = outbox_retries_unfinished(ext);
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
		OutboxBatch *in_flight = outbox_claimed_batch();

		batch = outbox_claim_batch(ext, batch_size, PG_GETARG_INT64(1), in_flight, NIL);
		outbox_claimed_keep(batch);
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
