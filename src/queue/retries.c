/*-------------------------------------------------------------------------
 *
 * retries.c
 *		The retry table, outbox_retries: every statement on it and every
 *		look at its indexes, for the claim, the recording, the retention
 *		and the operator's functions; and what the claim and the recording
 *		agree on: the in-memory count of claimed log events not yet
 *		recorded and its pre-commit check, and the events outbox_claim()
 *		returned, kept until they are recorded.  docs/design.md, "The
 *		claim", says why.
 *
 * Every function runs in a transaction with an active snapshot; those that
 * run statements say whether the caller is connected to SPI.
 *
 * src/queue/retries.c
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
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "queue/retries.h"

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
 * Copies of abandoned events ($1 ids) for the dead-letter topic $2, with
 * headers saying where they come from; none of that topic's own events.
 */
static OutboxPlan dead_letter_plan = {
	"INSERT INTO %1$s.outbox_retries (topic, key, payload, headers)"
	" SELECT $2, m.key, m.payload,"
	"        coalesce(m.headers, '{}') || jsonb_build_object('original_topic', m.topic,"
	"            'original_event_id', m.event_id::text, 'attempts', m.attempts::text,"
	"            'last_error', coalesce(m.last_error, ''))"
	"   FROM %1$s.outbox_retries m"
	"  WHERE m.id = ANY ($1) AND m.status = 'abandoned' AND $2 <> '' AND m.topic <> $2"
	"  ORDER BY m.id",
	2, {INT8ARRAYOID, TEXTOID}
};

/* the pending and failed events of id $1 (all if null) abandoned, error $2 */
static OutboxPlan abandon_plan = {
	"UPDATE %1$s.outbox_retries m"
	"   SET status = 'abandoned', next_attempt_at = NULL,"
	"       last_error = coalesce(m.last_error, $2)"
	" WHERE (m.id = $1 OR $1 IS NULL) AND m.status IN ('pending', 'failed')"
	" RETURNING m.id",
	2, {INT8OID, TEXTOID}
};

/* is any event of the retry table due? */
static OutboxPlan due_plan = {
	"SELECT EXISTS (SELECT FROM %1$s.outbox_retries m"
	"               WHERE m.status IN ('pending', 'failed')"
	"               AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now()))"
};

/* events delivered ($1 ids, $2 partitions, $3 offsets), kept as published */
static OutboxPlan published_plan = {
	"UPDATE %1$s.outbox_retries m"
	"   SET status = 'published', attempts = m.attempts + 1,"
	"       published_at = clock_timestamp(), next_attempt_at = NULL,"
	"       kafka_partition = u.kafka_partition, kafka_offset = u.kafka_offset"
	"  FROM unnest($1::bigint[], $2::integer[], $3::bigint[]) AS u(id, kafka_partition, kafka_offset)"
	" WHERE m.id = u.id",
	3, {INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID}
};

/* events delivered ($1 ids), not kept */
static OutboxPlan delivered_gone_plan = {
	"DELETE FROM %1$s.outbox_retries m WHERE m.id = ANY ($1)",
	1, {INT8ARRAYOID}
};

/*
 * A refused attempt of events ($1 ids, $2 errors): the attempts each has
 * had now, by its position in $1.
 */
static OutboxPlan attempt_plan = {
	"UPDATE %1$s.outbox_retries m SET attempts = m.attempts + 1, last_error = u.error"
	"  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS u(id, error, i)"
	" WHERE m.id = u.id"
	" RETURNING u.i::integer, m.attempts",
	2, {INT8ARRAYOID, TEXTARRAYOID}
};

/* what a refused attempt leads to ($1 ids, $2 abandoned, $3 next attempt) */
static OutboxPlan refused_plan = {
	"UPDATE %1$s.outbox_retries m"
	"   SET status = (CASE WHEN u.abandoned THEN 'abandoned' ELSE 'failed' END)::%1$s.outbox_status,"
	"       next_attempt_at = CASE WHEN u.abandoned THEN NULL ELSE u.next_attempt_at END"
	"  FROM unnest($1::bigint[], $2::boolean[], $3::timestamptz[]) AS u(id, abandoned, next_attempt_at)"
	" WHERE m.id = u.id",
	3, {INT8ARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID}
};

/* the rows of the given ids, as the columns of the log */
static OutboxPlan fetch_plan = {
	"SELECT m.id, NULL::xid8, m.event_id, m.topic, m.key, m.payload, m.headers, m.created_at"
	"  FROM %1$s.outbox_retries m WHERE m.id = ANY ($1) ORDER BY m.id FOR UPDATE OF m",
	1, {INT8ARRAYOID}
};

/*
 * Events handed off ($1 ids, $2 when each is due again): due then, unless
 * the outcome of their delivery is recorded first.
 */
static OutboxPlan handed_off_plan = {
	"UPDATE %1$s.outbox_retries m SET next_attempt_at = u.due"
	"  FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, due)"
	" WHERE m.id = u.id",
	2, {INT8ARRAYOID, TIMESTAMPTZARRAYOID}
};

/*
 * Of events handed off ($1 ids, $2 when each is due again), those still
 * as their hand-off left them, locked, by their position in $1: not
 * published, abandoned, retried or discarded since, by an operator or by
 * a worker that sent them again.  One that another session holds locked
 * (an operator's transaction still open) is passed over rather than
 * waited for.
 */
static OutboxPlan still_handed_off_plan = {
	"SELECT u.i::integer FROM %1$s.outbox_retries m"
	"  JOIN unnest($1::bigint[], $2::timestamptz[]) WITH ORDINALITY AS u(id, due, i)"
	"    ON m.id = u.id"
	" WHERE m.next_attempt_at = u.due AND m.status IN ('pending', 'failed')"
	" ORDER BY m.id FOR UPDATE OF m SKIP LOCKED",
	2, {INT8ARRAYOID, TIMESTAMPTZARRAYOID}
};

/* published rows past $1, abandoned rows created before $2, at most $3 of each */
static OutboxPlan purge_plan = {
	"WITH published AS ("
	"  DELETE FROM %1$s.outbox_retries"
	"   WHERE id IN (SELECT m.id FROM %1$s.outbox_retries m"
	"                 WHERE m.status = 'published' AND m.published_at < now() - $1"
	"                 LIMIT $3 FOR UPDATE SKIP LOCKED)"
	"  RETURNING 1"
	"), abandoned AS ("
	"  DELETE FROM %1$s.outbox_retries"
	"   WHERE id IN (SELECT m.id FROM %1$s.outbox_retries m"
	"                 WHERE m.status = 'abandoned' AND m.created_at < now() - $2"
	"                 LIMIT $3 FOR UPDATE SKIP LOCKED)"
	"  RETURNING 1"
	")"
	" SELECT (SELECT count(*) FROM published) + (SELECT count(*) FROM abandoned)",
	3, {INTERVALOID, INTERVALOID, INT4OID}
};

/* the lowest id of the table */
static OutboxPlan first_id_plan = {
	"SELECT min(m.id) FROM %1$s.outbox_retries m"
};

static OutboxPlan undelivered_plan = {
	"SELECT count(*) FROM %1$s.outbox_retries m WHERE m.status IN ('pending', 'failed')"
};

static OutboxPlan retry_plan = {
	"UPDATE %1$s.outbox_retries m SET status = 'pending', attempts = 0, next_attempt_at = NULL"
	" WHERE m.id = $1 AND m.status IN ('failed', 'abandoned')",
	1, {INT8OID}
};

static OutboxPlan retry_abandoned_plan = {
	"UPDATE %1$s.outbox_retries m SET status = 'pending', attempts = 0, next_attempt_at = NULL"
	" WHERE m.status = 'abandoned' AND ($1 IS NULL OR m.topic = $1)",
	1, {TEXTOID}
};

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

/*
 * Count n more claimed log events (n < 0: recorded ones) of this
 * transaction; its commit fails unless the count is back to 0.  Not for a
 * database at version 1.1, whose reader row counts them.
 */
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
void
outbox_claimed_keep(OutboxBatch *batch)
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
OutboxBatch *
outbox_claimed_batch(void)
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
index_holds(const OutboxExtension *ext, const char *index, int64 first, int64 last)
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
 * Does the retry table hold an unfinished event (pending or failed, due
 * now or later), as a snapshot taken now sees it?  See index_holds.
 */
bool
outbox_retries_unfinished(const OutboxExtension *ext)
{
	return index_holds(ext, "outbox_retries_due", 0, -1);
}

/*
 * Does the retry table hold an event with an id from first to last, as a
 * snapshot taken now sees it?  See index_holds.
 */
bool
outbox_retries_between(const OutboxExtension *ext, int64 first, int64 last)
{
	return index_holds(ext, "outbox_retries_pkey", first, last);
}

/*
 * Claim the due events of the retry table into events, at most room of
 * them, none of the ids in_flight (a bigint[] datum) nor of the topics
 * held (a text[] datum), while their bytes
 * stay below *bytes_left (reduced by what they take); copies in memory
 * context cxt.  Returns how many.
 */
int
outbox_retries_claim(const OutboxExtension *ext, int room, Datum in_flight, Datum held,
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
outbox_retries_copy(const OutboxExtension *ext, OutboxEvent **events, int n)
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
int
outbox_retries_hold_back(const OutboxExtension *ext, OutboxEvent *events, int n,
						 bool *held_back)
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
	outbox_retries_copy(ext, held, nheld);
	*held_back = nheld > 0;
	for (int i = 0; i < n; i++)
		if (!skip[i])
			events[kept++] = events[i];
	return kept;
}

/*
 * Copy abandoned events (ids, a bigint[] datum) to the dead-letter topic,
 * unless topic is empty; returns how many copies.  The caller is connected
 * to SPI.
 */
int64
outbox_retries_dead_letters(const OutboxExtension *ext, Datum ids, const char *topic)
{
	Datum		values[2] = {ids, CStringGetTextDatum(topic)};

	if (topic[0] == '\0')
		return 0;
	return (int64) outbox_run(ext, &dead_letter_plan, values, -1);
}

/*
 * Abandon the pending or failed event of id id (a bigint datum; all of
 * them if all), with last_error error if it has none, and copy what was
 * abandoned to the dead-letter topic.  Returns how many were abandoned.
 * The caller is connected to SPI and has copied the unread log events
 * among them to the retry table.
 */
int64
outbox_retries_abandon(const OutboxExtension *ext, Datum id, bool all, const char *error,
					   const char *dead_letter_topic)
{
	Datum		values[2] = {id, CStringGetTextDatum(error)};
	char		nulls[2] = {all ? 'n' : ' ', ' '};
	Datum	   *ids;
	int			n;

	if (SPI_execute_plan(outbox_plan(ext, &abandon_plan), values, nulls, false, 0) < 0)
		elog(ERROR, "outbox statement failed");
	n = (int) SPI_processed;
	ids = palloc((n + 1) * sizeof(Datum));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
	}
	outbox_retries_dead_letters(ext, outbox_array(ids, NULL, n, INT8OID), dead_letter_topic);
	return n;
}

/*
 * Is any event of the retry table due?  Takes a connection to SPI.
 */
bool
outbox_retries_due(const OutboxExtension *ext)
{
	bool		isnull;
	bool		due;

	SPI_connect();
	due = DatumGetBool(outbox_run_value(ext, &due_plan, NULL, &isnull));
	SPI_finish();
	return due;
}

/*
 * Record the delivery of events of the retry table (ids, partitions,
 * offsets: arrays of one element per event), kept as published, or
 * removed unless keep.  The caller is connected to SPI.
 */
void
outbox_retries_published(const OutboxExtension *ext, Datum ids, Datum partitions,
						 Datum offsets, bool keep)
{
	Datum		values[3] = {ids, partitions, offsets};

	outbox_run(ext, keep ? &published_plan : &delivered_gone_plan, values, -1);
}

/*
 * Charge each of n events of the retry table (ids, errors: arrays of n)
 * an attempt refused with its error.  Returns the attempts each has had
 * now, by its position in ids; 0 for one that the table does not hold.
 * The caller is connected to SPI.
 */
int32 *
outbox_retries_charge(const OutboxExtension *ext, Datum ids, Datum errors, int n)
{
	Datum		values[2] = {ids, errors};
	int32	   *attempts = palloc0((n + 1) * sizeof(int32));

	outbox_run(ext, &attempt_plan, values, -1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		bool		isnull;
		int			i = DatumGetInt32(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull));

		attempts[i - 1] = DatumGetInt32(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull));
	}
	return attempts;
}

/*
 * After a refused attempt, the events of ids (arrays of one element per
 * event): abandoned, or failed and due at their next attempt.  The caller
 * is connected to SPI.
 */
void
outbox_retries_refused(const OutboxExtension *ext, Datum ids, Datum abandoned,
					   Datum next_attempts)
{
	Datum		values[3] = {ids, abandoned, next_attempts};

	outbox_run(ext, &refused_plan, values, -1);
}

/*
 * The events of the retry table of the given ids (a bigint[] datum, sorted
 * by id), locked until the end of the transaction, into events, in id
 * order; copies in memory context cxt.  Returns how many.  The caller is
 * connected to SPI.
 */
int
outbox_retries_fetch(const OutboxExtension *ext, Datum ids, OutboxEvent *events,
					 MemoryContext cxt)
{
	MemoryContext spi_cxt;
	int			n = 0;

	outbox_run(ext, &fetch_plan, &ids, -1);
	spi_cxt = MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[OUTBOX_LOG_COLUMNS];
		bool		isnull[OUTBOX_LOG_COLUMNS];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, isnull);
		outbox_event_store(&events[n++], SPI_tuptable->tupdesc, row, isnull);
	}
	MemoryContextSwitchTo(spi_cxt);
	return n;
}

/*
 * Events handed off (ids, dues: arrays of one element per event): each
 * due again at its due, unless the outcome of its delivery is recorded
 * first.  The caller is connected to SPI.
 */
void
outbox_retries_handed_off(const OutboxExtension *ext, Datum ids, Datum dues)
{
	Datum		values[2] = {ids, dues};

	outbox_run(ext, &handed_off_plan, values, -1);
}

/*
 * Of n events handed off (ids, dues: arrays of n, the ids sorted), which
 * are still as their hand-off left them, locked now (see
 * still_handed_off_plan): true by position in ids.  The caller is
 * connected to SPI.
 */
bool *
outbox_retries_still_handed_off(const OutboxExtension *ext, Datum ids, Datum dues, int n)
{
	Datum		values[2] = {ids, dues};
	bool	   *still = palloc0((n + 1) * sizeof(bool));

	outbox_run(ext, &still_handed_off_plan, values, -1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;

		still[DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
										  1, &isnull)) - 1] = true;
	}
	return still;
}

/*
 * Delete up to batch_size (an integer datum) published events past the
 * published retention and as many abandoned ones past the abandoned
 * retention (interval datums); returns how many it deleted.  The caller is
 * connected to SPI.
 */
int64
outbox_retries_purge(const OutboxExtension *ext, Datum published_retention,
					 Datum abandoned_retention, Datum batch_size)
{
	Datum		values[3] = {published_retention, abandoned_retention, batch_size};
	bool		isnull;

	return DatumGetInt64(outbox_run_value(ext, &purge_plan, values, &isnull));
}

/*
 * The lowest id of the retry table, PG_INT64_MAX if it is empty.  The
 * caller is connected to SPI.
 */
int64
outbox_retries_first_id(const OutboxExtension *ext)
{
	bool		isnull;
	Datum		first = outbox_run_value(ext, &first_id_plan, NULL, &isnull);

	return isnull ? PG_INT64_MAX : DatumGetInt64(first);
}

/*
 * How many events of the retry table are pending or failed, as the active
 * snapshot sees them, with a read-only statement.  The caller is connected
 * to SPI.
 */
int64
outbox_retries_undelivered(const OutboxExtension *ext)
{
	bool		isnull;
	int			ret = SPI_execute_plan(outbox_plan(ext, &undelivered_plan), NULL, NULL, true, 0);

	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									   1, &isnull));
}

/*
 * The failed or abandoned event of id id (a bigint datum) back to pending,
 * due at once, attempts reset; returns 1, or 0 if it was neither.  The
 * caller is connected to SPI.
 */
int64
outbox_retries_retry(const OutboxExtension *ext, Datum id)
{
	return (int64) outbox_run(ext, &retry_plan, &id, -1);
}

/*
 * Every abandoned event of topic (a text datum; of every topic if all)
 * back to pending, due at once, attempts reset; returns how many.  The
 * caller is connected to SPI.
 */
int64
outbox_retries_retry_abandoned(const OutboxExtension *ext, Datum topic, bool all)
{
	if (SPI_execute_plan(outbox_plan(ext, &retry_abandoned_plan), &topic,
						 all ? "n" : " ", false, 0) < 0)
		elog(ERROR, "outbox statement failed");
	return (int64) SPI_processed;
}
