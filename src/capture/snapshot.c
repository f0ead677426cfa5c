/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *		Snapshots on attach: the request (a row of outbox_snapshots_state
 *		that outbox_attach writes), the chunks of read (r) events that the
 *		worker publishes between batches, and whether a change is left to
 *		the snapshot (outbox_snapshot_ahead).  A writer that leaves a change
 *		to it holds the table's snapshot lock in share mode to the end of
 *		its transaction; a chunk takes it in exclusive mode.
 *		docs/design.md, "Capture, the router and snapshots", has the order
 *		argument, the bounds and the failures.
 *
 * src/capture/snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "catalog/partition.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "optimizer/plancat.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/typcache.h"

#include "base/catalog.h"
#include "capture/capture.h"
#include "capture/snapshot.h"
#include "format/format.h"
#include "launcher/launcher.h"

/* rows read by a chunk, at most */
#define CHUNK_ROWS 1000
/*
 * How long a chunk may take: its statements are cancelled after CHUNK_MS,
 * and the worker stops after twice as long.
 */
#define CHUNK_MS 1000
/* at 1.2, how long after a chunk that did not end its snapshot waits */
#define SLOW_RETRY_MS 60000
/*
 * How long a chunk waits for the transactions that changed rows ahead of
 * the snapshot (1.3; writers that come meanwhile queue behind it), or
 * for a row lock (1.2), before it is tried again.
 */
#define SNAPSHOT_LOCK_TIMEOUT "100ms"
#define SNAPSHOT_ROW_LOCK_TIMEOUT "1s"

/* at most this many leaf partitions are remembered per chunk */
#define MAX_LEAVES 64

static OutboxPlan request_plan = {
	"INSERT INTO %1$s.outbox_snapshots_state AS s"
	"  (relid, topic, format, trigger_args, walk_columns, rows_estimated)"
	" VALUES ($1, $2, $3, $4, $5, $6)"
	" ON CONFLICT (relid) DO UPDATE"
	" SET topic = excluded.topic, format = excluded.format,"
	"     trigger_args = excluded.trigger_args, walk_columns = excluded.walk_columns,"
	"     last_key = NULL, rows_done = 0, rows_estimated = excluded.rows_estimated,"
	"     started = now(), finished = NULL, last_error = NULL, next_attempt_at = NULL",
	6, {OIDOID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID}
};

/* 1.3: the key's types noted too */
static OutboxPlan request13_plan = {
	"INSERT INTO %1$s.outbox_snapshots_state AS s"
	"  (relid, topic, format, trigger_args, walk_columns, rows_estimated, key_types)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7)"
	" ON CONFLICT (relid) DO UPDATE"
	" SET topic = excluded.topic, format = excluded.format,"
	"     trigger_args = excluded.trigger_args, walk_columns = excluded.walk_columns,"
	"     last_key = NULL, rows_done = 0, rows_estimated = excluded.rows_estimated,"
	"     started = now(), finished = NULL, last_error = NULL, next_attempt_at = NULL,"
	"     key_types = excluded.key_types, failed = NULL, chunk_rows = NULL,"
	"     chunk_started = NULL",
	7, {OIDOID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID, TEXTARRAYOID}
};

/* the snapshot of a table, unless it was asked for with trigger arguments $2 */
static OutboxPlan forget_plan = {
	"DELETE FROM %1$s.outbox_snapshots_state s"
	" WHERE s.relid = $1 AND ($2 IS NULL OR s.trigger_args IS DISTINCT FROM $2)",
	2, {OIDOID, TEXTARRAYOID}
};

/* the snapshot to take a chunk of */
static OutboxPlan pick_plan = {
	"SELECT s.relid"
	"  FROM %1$s.outbox_snapshots_state s"
	" WHERE s.finished IS NULL"
	"   AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= now())"
	" ORDER BY s.started, s.relid"
	" LIMIT 1"
	" FOR UPDATE SKIP LOCKED",
	0, {InvalidOid}
};

/* is a snapshot not finished (at 1.3: nor failed)? */
static OutboxPlan unfinished_plan = {
	"SELECT FROM %1$s.outbox_snapshots_state s WHERE s.finished IS NULL LIMIT 1"
};

static OutboxPlan unfinished13_plan = {
	"SELECT FROM %1$s.outbox_snapshots_state s"
	" WHERE s.finished IS NULL AND s.failed IS NULL LIMIT 1"
};

/* 1.3: whether its last chunk was left unfinished, and how many rows the next reads */
static OutboxPlan pick13_plan = {
	"SELECT s.relid, s.chunk_started IS NOT NULL, coalesce(s.chunk_rows, $1)"
	"  FROM %1$s.outbox_snapshots_state s"
	" WHERE s.finished IS NULL AND s.failed IS NULL"
	"   AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= now())"
	" ORDER BY s.started, s.relid"
	" LIMIT 1"
	" FOR UPDATE SKIP LOCKED",
	1, {INT4OID}
};

/* 1.3: a chunk begins (committed before it runs) */
static OutboxPlan begin13_plan = {
	"UPDATE %1$s.outbox_snapshots_state s SET chunk_started = now() WHERE s.relid = $1",
	1, {OIDOID}
};

/* 1.2: a chunk begins (committed before it runs): it ends the wait it sets */
static OutboxPlan begin12_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET next_attempt_at = now() + $2 * interval '1 millisecond'"
	" WHERE s.relid = $1",
	2, {OIDOID, FLOAT8OID}
};

/* 1.3: a chunk that did not run (its table was busy) */
static OutboxPlan end13_plan = {
	"UPDATE %1$s.outbox_snapshots_state s SET chunk_started = NULL WHERE s.relid = $1",
	1, {OIDOID}
};

/* the snapshot of a table, locked, if it is still to be taken */
static OutboxPlan state_plan = {
	"SELECT s.trigger_args, s.walk_columns, s.last_key, NULL::text[], $2"
	"  FROM %1$s.outbox_snapshots_state s"
	" WHERE s.relid = $1 AND s.finished IS NULL"
	" FOR UPDATE SKIP LOCKED",
	2, {OIDOID, INT4OID}
};

/* 1.3: and the key's types noted, and the rows of the next chunk */
static OutboxPlan state13_plan = {
	"SELECT s.trigger_args, s.walk_columns, s.last_key, s.key_types,"
	"       coalesce(s.chunk_rows, $2)"
	"  FROM %1$s.outbox_snapshots_state s"
	" WHERE s.relid = $1 AND s.finished IS NULL AND s.failed IS NULL"
	" FOR UPDATE SKIP LOCKED",
	2, {OIDOID, INT4OID}
};

static OutboxPlan progress_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_key = coalesce($2, s.last_key), rows_done = s.rows_done + $3,"
	"       finished = CASE WHEN $4 THEN now() END,"
	"       last_error = NULL, next_attempt_at = NULL"
	" WHERE s.relid = $1",
	4, {OIDOID, TEXTARRAYOID, INT8OID, BOOLOID}
};

static OutboxPlan progress13_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_key = coalesce($2, s.last_key), rows_done = s.rows_done + $3,"
	"       finished = CASE WHEN $4 THEN now() END,"
	"       last_error = NULL, next_attempt_at = NULL,"
	"       chunk_rows = $5, chunk_started = NULL, key_types = $6"
	" WHERE s.relid = $1",
	6, {OIDOID, TEXTARRAYOID, INT8OID, BOOLOID, INT4OID, TEXTARRAYOID}
};

static OutboxPlan failed_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_error = $2, next_attempt_at = now() + $3 * interval '1 millisecond'"
	" WHERE s.relid = $1 AND s.finished IS NULL",
	3, {OIDOID, TEXTOID, FLOAT8OID}
};

/* 1.3: also the size of the next chunk ($4, NULL: as it was) and whether it failed for good */
static OutboxPlan failed13_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_error = $2, next_attempt_at = now() + $3 * interval '1 millisecond',"
	"       chunk_rows = coalesce($4, s.chunk_rows), chunk_started = NULL,"
	"       failed = CASE WHEN $5 THEN now() END"
	" WHERE s.relid = $1 AND s.finished IS NULL",
	5, {OIDOID, TEXTOID, FLOAT8OID, INT4OID, BOOLOID}
};

/* 1.3: the rows of the chunk of a snapshot */
static OutboxPlan rows13_plan = {
	"SELECT coalesce(s.chunk_rows, $2) FROM %1$s.outbox_snapshots_state s WHERE s.relid = $1",
	2, {OIDOID, INT4OID}
};

/* the timeout that stops the worker when a chunk runs twice its time */
static TimeoutId chunk_stop_timeout = MAX_TIMEOUTS;

/*
 * A text[] of n strings.
 */
static Datum
text_array(char **items, int n)
{
	Datum	   *datums = palloc(Max(n, 1) * sizeof(Datum));

	for (int i = 0; i < n; i++)
		datums[i] = CStringGetTextDatum(items[i]);
	return PointerGetDatum(construct_array(datums, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * The strings of a text[] without nulls; palloc'd.
 */
static char **
text_array_items(Datum array, int *n)
{
	Datum	   *datums;
	bool	   *nulls;
	char	  **items;

	deconstruct_array(DatumGetArrayTypeP(array), TEXTOID, -1, false, TYPALIGN_INT,
					  &datums, &nulls, n);
	items = palloc((*n + 1) * sizeof(char *));
	for (int i = 0; i < *n; i++)
		items[i] = nulls[i] ? NULL : TextDatumGetCString(datums[i]);
	return items;
}

/*
 * About how many rows rel has: the planner's estimate, summed over the
 * partitions of a partitioned table.
 */
static int64
estimate_rows(Relation rel)
{
	List	   *relids;
	ListCell   *lc;
	double		total = 0;

	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		relids = find_all_inheritors(RelationGetRelid(rel), AccessShareLock, NULL);
	else
		relids = list_make1_oid(RelationGetRelid(rel));
	foreach(lc, relids)
	{
		Oid			relid = lfirst_oid(lc);
		Relation	r;
		int32	   *widths;
		BlockNumber pages;
		double		tuples;
		double		allvisfrac;

		if (get_rel_relkind(relid) != RELKIND_RELATION)
			continue;
		r = table_open(relid, AccessShareLock);
		widths = palloc0((RelationGetNumberOfAttributes(r) + 1) * sizeof(int32));
		estimate_rel_size(r, widths, &pages, &tuples, &allvisfrac);
		total += tuples;
		table_close(r, AccessShareLock);
	}
	return (int64) total;
}

/*
 * What orders the column name of rel in a snapshot: its type, collation
 * and the type's btree operator family, as text; NULL if the column is
 * gone.
 */
static char *
key_type(Relation rel, const char *name)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);
	Form_pg_attribute attr;
	TypeCacheEntry *typentry;
	StringInfoData buf;

	if (attnum <= 0)
		return NULL;
	attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	typentry = lookup_type_cache(attr->atttypid, TYPECACHE_BTREE_OPFAMILY);
	initStringInfo(&buf);
	appendStringInfoString(&buf, format_type_be(attr->atttypid));
	if (OidIsValid(attr->attcollation))
		appendStringInfo(&buf, " COLLATE %s",
						 quote_identifier(get_collation_name(attr->attcollation)));
	if (OidIsValid(typentry->btree_opf))
	{
		HeapTuple	tuple = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(typentry->btree_opf));

		if (HeapTupleIsValid(tuple))
		{
			Form_pg_opfamily form = (Form_pg_opfamily) GETSTRUCT(tuple);

			appendStringInfo(&buf, " USING %s",
							 quote_qualified_identifier(get_namespace_name(form->opfnamespace),
														NameStr(form->opfname)));
			ReleaseSysCache(tuple);
		}
	}
	return buf.data;
}

/*
 * The index of the column of walk whose type, collation or order is no
 * longer what types says (types NULL: not noted), or -1; *now is what it
 * is now (NULL: the column is gone).
 */
static int
changed_key(Relation rel, char **walk, int nwalk, char **types, int ntypes, char **now)
{
	*now = NULL;
	if (types == NULL)
		return -1;
	for (int i = 0; i < nwalk; i++)
	{
		*now = key_type(rel, walk[i]);
		if (i >= ntypes || *now == NULL || types[i] == NULL || strcmp(*now, types[i]) != 0)
			return i;
	}
	return -1;
}

/*
 * Do the columns walk of rel, NOT NULL, hold a unique index of theirs, on
 * nothing else and without a predicate or expressions, whose order is
 * their types' (the walk's)?  Then a chunk of n keys is n rows.
 */
static bool
unique_key(Relation rel, char **walk, int nwalk)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = index->rd_index;
		bool		matches = form->indisunique && form->indisvalid &&
			form->indnkeyatts == nwalk &&
			heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL) &&
			heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL);

		for (int i = 0; i < nwalk && matches; i++)
		{
			AttrNumber	attnum = get_attnum(RelationGetRelid(rel), walk[i]);
			Form_pg_attribute attr;
			int			j = 0;

			while (j < nwalk && form->indkey.values[j] != attnum)
				j++;
			if (attnum <= 0 || j == nwalk)
			{
				matches = false;
				break;
			}
			attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
			matches = attr->attnotnull && index->rd_opfamily[j] ==
				lookup_type_cache(attr->atttypid, TYPECACHE_BTREE_OPFAMILY)->btree_opf;
		}
		index_close(index, AccessShareLock);
		if (matches)
		{
			found = true;
			break;
		}
	}
	list_free(indexes);
	return found;
}

/*
 * Take the snapshot lock of the table relid in mode: ShareLock for a
 * transaction that leaves a change to the snapshot, ExclusiveLock for a
 * chunk.  Only this code takes it: the object (outbox_snapshots_state,
 * relid) is nothing else's.  Held to the end of the transaction.
 */
static void
lock_snapshot(const OutboxExtension *ext, Oid relid, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, outbox_relation(ext, "outbox_snapshots_state"),
					   relid, 0);
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * Ask for a snapshot of rel, captured with trigger arguments args, read in
 * the order of columns walk; one asked for before starts over.  The worker
 * is woken when the transaction commits.  The walk must be a unique key
 * (42P10), and the caller must be able to read every row: row-level
 * security must not apply to her, unless she owns the table, as whom the
 * chunks read it (42501).
 */
void
outbox_snapshot_request(const OutboxExtension *ext, Relation rel, const char *format,
						const char *topic, char **args, int nargs, char **walk, int nwalk)
{
	Datum		values[7];
	char	  **types = palloc(Max(nwalk, 1) * sizeof(char *));
	ListCell   *lc;

	if (!unique_key(rel, walk, nwalk))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("cannot snapshot table \"%s\": there is no unique index on its key columns",
						RelationGetRelationName(rel)),
				 errdetail("A snapshot reads the table in chunks of rows ordered by its primary key, or by key columns that are NOT NULL and the columns of a unique index."),
				 errhint("Add a primary key, or a unique index on key_columns.")));
	if (GetUserId() != rel->rd_rel->relowner &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot snapshot table \"%s\": row-level security applies to role \"%s\"",
						RelationGetRelationName(rel), GetUserNameFromId(GetUserId(), false)),
				 errdetail("A snapshot reads the table as its owner, who may read rows that its policies hide from you."),
				 errhint("Ask the table's owner to attach it with snapshot => true.")));
	for (int i = 0; i < nwalk; i++)
		types[i] = key_type(rel, walk[i]);
	values[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	values[1] = CStringGetTextDatum(topic);
	values[2] = CStringGetTextDatum(format);
	values[3] = text_array(args, nargs);
	values[4] = text_array(walk, nwalk);
	values[5] = Int64GetDatum(estimate_rows(rel));
	values[6] = text_array(types, nwalk);
	SPI_connect();
	outbox_run_as_owner(ext, ext->version >= OUTBOX_VERSION(1, 3) ? &request13_plan : &request_plan,
						values, NULL, -1);
	SPI_finish();
	/* the writers of the table and its partitions look again (capture/tables.c) */
	foreach(lc, find_all_inheritors(RelationGetRelid(rel), NoLock, NULL))
		CacheInvalidateRelcacheByRelid(lfirst_oid(lc));
	outbox_wake_at_commit();
}

/*
 * Cancel the snapshot of relid, if there is one, unless it was asked for
 * with the trigger arguments args (NULL: whatever they were).
 */
void
outbox_snapshot_forget(const OutboxExtension *ext, Oid relid, char **args, int nargs)
{
	Datum		values[2];
	char		nulls[3] = "  ";

	if (ext->version < OUTBOX_VERSION(1, 2))
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = args ? text_array(args, nargs) : (Datum) 0;
	if (args == NULL)
		nulls[1] = 'n';
	SPI_connect();
	outbox_run_as_owner(ext, &forget_plan, values, nulls, -1);
	SPI_finish();
}

/*
 * The snapshot of the locked state row of relid fails for good (1.3), or
 * is cancelled (1.2, which has no word for it), saying why.  The caller
 * is connected to SPI.
 */
static void
give_up(const OutboxExtension *ext, Oid relid, const char *why)
{
	Datum		values[5];
	char		nulls[6] = "   n ";

	ereport(LOG,
			(errmsg("snapshot of table \"%s\" failed: %s", get_rel_name(relid), why)));
	if (ext->version < OUTBOX_VERSION(1, 3))
	{
		values[0] = ObjectIdGetDatum(relid);
		outbox_run_as_owner(ext, &forget_plan, values, " n", -1);
		return;
	}
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(why);
	values[2] = Float8GetDatum(0);
	values[3] = (Datum) 0;
	values[4] = BoolGetDatum(true);
	outbox_run_as_owner(ext, &failed13_plan, values, nulls, -1);
}

/*
 * A chunk of rows rows of the snapshot of relid ran out of time, for the
 * reason why (1.3): the next ones read a tenth as many rows, after
 * retry_ms; a chunk of one row fails the snapshot.  The caller is
 * connected to SPI.
 */
static void
ran_out_of_time(const OutboxExtension *ext, Oid relid, int rows, const char *why, int retry_ms)
{
	Datum		values[5];

	if (rows <= 1)
	{
		give_up(ext, relid,
				psprintf("%s; reading a single row takes longer than that: the table's row-level security policies, or the functions its columns' types call, are too slow for a snapshot",
						 why));
		return;
	}
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(psprintf("%s; chunks of %d rows from now on",
											 why, Max(rows / 10, 1)));
	values[2] = Float8GetDatum(retry_ms);
	values[3] = Int32GetDatum(Max(rows / 10, 1));
	values[4] = BoolGetDatum(false);
	outbox_run_as_owner(ext, &failed13_plan, values, NULL, -1);
}

/*
 * Record that a chunk of the snapshot of relid failed with error
 * (sqlerrcode): it is tried again after retry_ms; at 1.3, a chunk that
 * was cancelled (its time was up) makes the next ones smaller.  Called by
 * the worker, in a new transaction.
 */
void
outbox_snapshot_failed(const OutboxExtension *ext, Oid relid, int sqlerrcode,
					   const char *error, int retry_ms)
{
	Datum		values[5];
	char		nulls[6] = "   n ";

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(error);
	values[2] = Float8GetDatum(retry_ms);
	values[3] = (Datum) 0;
	values[4] = BoolGetDatum(false);
	SPI_connect();
	if (ext->version < OUTBOX_VERSION(1, 3))
	{
		/* a chunk cancelled at 1.2 will be as slow when tried again */
		if (sqlerrcode == ERRCODE_QUERY_CANCELED)
			values[2] = Float8GetDatum(SLOW_RETRY_MS);
		outbox_run_as_owner(ext, &failed_plan, values, NULL, -1);
	}
	else if (sqlerrcode != ERRCODE_QUERY_CANCELED)
		outbox_run_as_owner(ext, &failed13_plan, values, nulls, -1);
	else
	{
		Datum		rows_values[2] = {ObjectIdGetDatum(relid), Int32GetDatum(CHUNK_ROWS)};

		if (outbox_run_as_owner(ext, &rows13_plan, rows_values, NULL, -1) == 1)
		{
			bool		isnull;
			int			rows = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 1, &isnull));

			ran_out_of_time(ext, relid, rows,
							psprintf("a chunk of %d rows was cancelled (%s), a chunk may take %d ms",
									 rows, error, CHUNK_MS),
							retry_ms);
		}
	}
	SPI_finish();
}

/* a snapshot in progress, as a writer sees it */
typedef struct SnapshotInProgress
{
	char	  **walk;			/* the walk columns */
	int			nwalk;
	char	  **last_key;		/* the last key read; NULL: none yet */
	char	  **types;			/* the key's types when it was asked for */
	int			ntypes;
} SnapshotInProgress;

/*
 * The snapshot in progress (neither finished nor failed) of the table
 * relid, as the latest snapshot sees it, in *state; false if there is
 * none (1.3).
 */
static bool
in_progress(const OutboxExtension *ext, Oid relid, SnapshotInProgress *state)
{
	Oid			stateid = get_relname_relid("outbox_snapshots_state", ext->schema);
	Relation	heap;
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	if (!OidIsValid(stateid))
		return false;
	heap = table_open(stateid, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&key, get_attnum(stateid, "relid"), BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(heap, RelationGetPrimaryKeyIndex(heap), true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		TupleDesc	desc = RelationGetDescr(heap);
		bool		isnull;
		Datum		value;

		(void) heap_getattr(tuple, get_attnum(stateid, "finished"), desc, &isnull);
		found = isnull;
		(void) heap_getattr(tuple, get_attnum(stateid, "failed"), desc, &isnull);
		found = found && isnull;
		if (found)
		{
			value = heap_getattr(tuple, get_attnum(stateid, "walk_columns"), desc, &isnull);
			state->walk = text_array_items(value, &state->nwalk);
			value = heap_getattr(tuple, get_attnum(stateid, "last_key"), desc, &isnull);
			state->last_key = NULL;
			if (!isnull)
			{
				int			n;

				state->last_key = text_array_items(value, &n);
				found = n == state->nwalk;
			}
			value = heap_getattr(tuple, get_attnum(stateid, "key_types"), desc, &isnull);
			state->types = isnull ? NULL : text_array_items(value, &state->ntypes);
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(heap, AccessShareLock);
	return found;
}

/*
 * Is row (of rel) past the last key that state's snapshot read, in the
 * order of its walk columns?  Rows are compared as the chunks compare
 * them: column by column, with the btree comparison of each column's type
 * and its collation.
 */
static bool
row_ahead(Relation rel, HeapTuple row, const SnapshotInProgress *state)
{
	if (state->last_key == NULL)
		return true;
	for (int i = 0; i < state->nwalk; i++)
	{
		AttrNumber	attnum = get_attnum(RelationGetRelid(rel), state->walk[i]);
		Form_pg_attribute attr;
		TypeCacheEntry *typentry;
		Oid			typinput;
		Oid			typioparam;
		Datum		value;
		Datum		last;
		bool		isnull;
		int			cmp;

		if (attnum <= 0)
			return false;
		attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
		typentry = lookup_type_cache(attr->atttypid, TYPECACHE_CMP_PROC_FINFO);
		value = heap_getattr(row, attnum, RelationGetDescr(rel), &isnull);
		if (isnull || !OidIsValid(typentry->cmp_proc))
			return false;
		getTypeInputInfo(attr->atttypid, &typinput, &typioparam);
		last = OidInputFunctionCall(typinput, state->last_key[i], typioparam, attr->atttypmod);
		cmp = DatumGetInt32(FunctionCall2Coll(&typentry->cmp_proc_finfo, attr->attcollation,
											  value, last));
		if (cmp != 0)
			return cmp > 0;
	}
	return false;
}

/*
 * rel and the partitioned tables it is a partition of, if it is one.
 */
static List *
table_and_ancestors(Relation rel)
{
	List	   *tables = list_make1_oid(RelationGetRelid(rel));

	if (rel->rd_rel->relispartition)
		tables = list_concat(tables, get_partition_ancestors(RelationGetRelid(rel)));
	return tables;
}

/*
 * Is a snapshot of rel (or of a partitioned table it is a partition of) in
 * progress, as the latest snapshot sees it (1.3)?  A request for one
 * invalidates the relcache entries of the table and its partitions
 * (outbox_snapshot_request), so that a writer that was told none is asks
 * again.
 */
bool
outbox_snapshot_in_progress(const OutboxExtension *ext, Relation rel)
{
	ListCell   *lc;
	SnapshotInProgress state;

	if (ext->version < OUTBOX_VERSION(1, 3))
		return false;
	foreach(lc, table_and_ancestors(rel))
	{
		if (in_progress(ext, lfirst_oid(lc), &state))
			return true;
	}
	return false;
}

/*
 * Will the snapshot in progress of rel (or of the partitioned table it is
 * a partition of) read row, which a change of the caller's transaction
 * left (1.3)?  Then the change is not published: the row's r event will
 * carry it, and the transaction holds the table's snapshot lock in share
 * mode until it ends, so that no chunk reads past the last key before it
 * has committed.  A row the snapshot has read, or of a snapshot whose key
 * changed (it fails at its next chunk), is not ahead.
 */
bool
outbox_snapshot_ahead(const OutboxExtension *ext, Relation rel, HeapTuple row)
{
	ListCell   *lc;
	SnapshotInProgress state;
	char	   *now;

	if (ext->version < OUTBOX_VERSION(1, 3))
		return false;
	foreach(lc, table_and_ancestors(rel))
	{
		Oid			relid = lfirst_oid(lc);

		if (!in_progress(ext, relid, &state) ||
			changed_key(rel, state.walk, state.nwalk, state.types, state.ntypes, &now) >= 0)
			continue;
		if (!row_ahead(rel, row, &state))
			return false;
		lock_snapshot(ext, relid, ShareLock);
		/* a chunk may have committed before the lock was granted */
		return in_progress(ext, relid, &state) && row_ahead(rel, row, &state);
	}
	return false;
}

/* a column the snapshot walks */
typedef struct WalkColumn
{
	char	   *name;			/* quoted */
	Oid			typid;
	int32		typmod;
	Oid			ops[BTMaxStrategyNumber + 1];	/* by btree strategy */
} WalkColumn;

/*
 * OPERATOR(schema.name) of operator opno; *builtin is cleared if it is not
 * in pg_catalog.
 */
static char *
operator_sql(Oid opno, bool *builtin)
{
	HeapTuple	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator form;
	char	   *sql;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	form = (Form_pg_operator) GETSTRUCT(tuple);
	if (form->oprnamespace != PG_CATALOG_NAMESPACE)
		*builtin = false;
	sql = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(form->oprnamespace)),
				   NameStr(form->oprname));
	ReleaseSysCache(tuple);
	return sql;
}

/*
 * OPERATOR(schema.name) of operator opno.
 */
static char *
op_sql(Oid opno)
{
	bool		builtin;

	return operator_sql(opno, &builtin);
}

/*
 * Walk column i (0-based) of n compared with parameter $(first + i), the
 * columns before it equal: "greater" (the lower bound, exclusive) or not
 * (the upper bound, inclusive).
 */
static void
append_expanded(StringInfo sql, WalkColumn *walk, int i, int n, int first, bool greater)
{
	const char *col = walk[i].name;

	if (i == n - 1)
	{
		appendStringInfo(sql, "t.%s %s $%d", col,
						 op_sql(walk[i].ops[greater ? BTGreaterStrategyNumber :
											BTLessEqualStrategyNumber]),
						 first + i);
		return;
	}
	appendStringInfo(sql, "(t.%s %s $%d OR (t.%s %s $%d AND ",
					 col,
					 op_sql(walk[i].ops[greater ? BTGreaterStrategyNumber : BTLessStrategyNumber]),
					 first + i,
					 col, op_sql(walk[i].ops[BTEqualStrategyNumber]), first + i);
	append_expanded(sql, walk, i + 1, n, first, greater);
	appendStringInfoString(sql, "))");
}

/*
 * The walk columns compared with parameters $first.. : (walk) > ($first..)
 * if greater, else (walk) <= ($first..).  Built-in types compare as rows,
 * which an index scan bounds exactly; other types column by column, with
 * their own operators named with their schema, and the first column's
 * bound stated apart for the index.
 */
static void
append_bound(StringInfo sql, WalkColumn *walk, int n, int first, bool greater, bool builtin)
{
	if (builtin)
	{
		appendStringInfoChar(sql, '(');
		for (int i = 0; i < n; i++)
			appendStringInfo(sql, "%st.%s", i > 0 ? ", " : "", walk[i].name);
		appendStringInfo(sql, ") %s (", greater ? ">" : "<=");
		for (int i = 0; i < n; i++)
			appendStringInfo(sql, "%s$%d", i > 0 ? ", " : "", first + i);
		appendStringInfoChar(sql, ')');
		return;
	}
	if (n > 1)
		appendStringInfo(sql, "t.%s %s $%d AND ", walk[0].name,
						 op_sql(walk[0].ops[greater ? BTGreaterEqualStrategyNumber :
											BTLessEqualStrategyNumber]),
						 first);
	append_expanded(sql, walk, 0, n, first, greater);
}

/* a partition of the table, as its events name it */
typedef struct Leaf
{
	Oid			relid;
	CaptureTable table;
} Leaf;

/*
 * The table of the events of rows of leaf, rows given with tupdesc.
 */
static CaptureTable *
leaf_table(Leaf *leaves, int *nleaves, Oid leaf, Relation rel, const CaptureConfig *config,
		   TupleDesc tupdesc)
{
	Relation	leafrel;

	for (int i = 0; i < *nleaves; i++)
		if (leaves[i].relid == leaf)
			return &leaves[i].table;
	if (*nleaves == MAX_LEAVES)
		*nleaves = 0;			/* forget them all: rare */
	leafrel = leaf == RelationGetRelid(rel) ? rel : table_open(leaf, AccessShareLock);
	leaves[*nleaves].relid = leaf;
	outbox_capture_table(config, leafrel, tupdesc, &leaves[*nleaves].table);
	if (leafrel != rel)
		table_close(leafrel, NoLock);
	return &leaves[(*nleaves)++].table;
}

/*
 * The settings that a value's text depends on: the output functions of
 * the date and time types, of interval, of float4, float8 and the
 * geometric types, of bytea and of money read them.
 */
static const char *const text_settings[] = {
	"DateStyle", "IntervalStyle", "TimeZone", "extra_float_digits", "bytea_output",
	"lc_monetary"
};

/*
 * Apply those of the settings config (a pg_db_role_setting.setconfig
 * array) that are text_settings, at the current GUC nest level; a value
 * that its setting refuses is logged and skipped, as a new session does.
 */
static void
apply_text_settings(Datum config)
{
	int			nitems;
	char	  **items = text_array_items(config, &nitems);

	for (int i = 0; i < nitems; i++)
	{
		char	   *name;
		char	   *value;

		if (items[i] == NULL)
			continue;
		ParseLongOption(items[i], &name, &value);
		for (int s = 0; value != NULL && s < lengthof(text_settings); s++)
			if (pg_strcasecmp(name, text_settings[s]) == 0)
				(void) set_config_option(text_settings[s], value, PGC_USERSET,
										 PGC_S_SESSION, GUC_ACTION_SAVE, true,
										 WARNING, false);
	}
}

/*
 * Apply, in a new GUC nest level, the text_settings that a new session of
 * a role without settings of its own gets from pg_db_role_setting in this
 * database (ALTER ROLE ALL SET, then ALTER DATABASE SET), so that events
 * are written as the application's sessions write them, where the
 * worker's own session has the built-in defaults (worker.c).  Every other
 * setting there is ignored.  Returns the nest level, for AtEOXact_GUC.
 */
static int
database_text_settings(void)
{
	const Oid	databases[] = {InvalidOid, MyDatabaseId};
	Relation	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	int			nestlevel = NewGUCNestLevel();

	for (int d = 0; d < lengthof(databases); d++)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tuple;

		ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(databases[d]));
		ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(InvalidOid));
		scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, NULL, 2, keys);
		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
											  RelationGetDescr(rel), &isnull);

			if (!isnull)
				apply_text_settings(config);
		}
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
	return nestlevel;
}

/*
 * Read the next chunk of rows and store their events, as the table's
 * owner in a restricted context; locked FOR SHARE unless guarded (1.3: the
 * caller holds the snapshot lock).  The events are written with the
 * database's settings of a value's text (database_text_settings), the
 * bound in the worker's.  Returns whether it was the last; the bound (the
 * last key read) goes in *bound, as text.
 */
static bool
read_chunk(const OutboxExtension *ext, Relation rel, const CaptureConfig *config,
		   WalkColumn *walk, int nwalk, char **last_key, int rows, bool guarded,
		   char ***bound, int64 *nrows)
{
	StringInfoData from;
	StringInfoData sql;
	StringInfoData order;
	Oid		   *argtypes = palloc(2 * nwalk * sizeof(Oid));
	Datum	   *values = palloc0(2 * nwalk * sizeof(Datum));
	char	   *nulls = palloc(2 * nwalk + 1);
	bool		builtin = true;
	bool		last;
	SPITupleTable *tuptable;
	TupleDesc	rowdesc;
	int			ncols;
	Leaf	   *leaves = palloc(MAX_LEAVES * sizeof(Leaf));
	int			nleaves = 0;
	MemoryContext rowcxt;
	MemoryContext oldcxt;
	int			nestlevel;

	for (int i = 0; i < nwalk; i++)
	{
		for (int s = 1; s <= BTMaxStrategyNumber; s++)
			(void) operator_sql(walk[i].ops[s], &builtin);
		argtypes[i] = argtypes[nwalk + i] = walk[i].typid;
		if (last_key != NULL)
		{
			Oid			typinput;
			Oid			typioparam;

			getTypeInputInfo(walk[i].typid, &typinput, &typioparam);
			values[i] = OidInputFunctionCall(typinput, last_key[i], typioparam, walk[i].typmod);
		}
	}
	/* parameters not given yet are null */
	memset(nulls, last_key != NULL ? ' ' : 'n', nwalk);
	memset(nulls + nwalk, 'n', nwalk);
	nulls[2 * nwalk] = '\0';

	initStringInfo(&from);
	appendStringInfo(&from, " FROM %s%s t",
					 rel->rd_rel->relkind == RELKIND_RELATION ? "ONLY " : "",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	initStringInfo(&order);
	appendStringInfoString(&order, " ORDER BY ");
	for (int i = 0; i < nwalk; i++)
		appendStringInfo(&order, "%st.%s", i > 0 ? ", " : "", walk[i].name);

	/* the bound: the key of the rows-th row from the last key, if one follows it */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < nwalk; i++)
		appendStringInfo(&sql, "%st.%s", i > 0 ? ", " : "", walk[i].name);
	appendStringInfoString(&sql, from.data);
	if (last_key != NULL)
	{
		appendStringInfoString(&sql, " WHERE ");
		append_bound(&sql, walk, nwalk, 1, true, builtin);
	}
	appendStringInfo(&sql, "%s OFFSET %d LIMIT 2", order.data, rows - 1);
	if (SPI_execute_with_args(sql.data, nwalk, argtypes, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading the bound of a snapshot chunk failed");
	/* no row after the bound: this chunk reads to the end */
	last = SPI_processed < 2;
	*bound = NULL;
	if (!last)
	{
		*bound = palloc(nwalk * sizeof(char *));
		for (int i = 0; i < nwalk; i++)
		{
			bool		isnull;

			values[nwalk + i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											  i + 1, &isnull);
			nulls[nwalk + i] = isnull ? 'n' : ' ';
			(*bound)[i] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);
		}
	}

	/* the rows, locked */
	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT t.*, t.tableoid%s WHERE true", from.data);
	if (last_key != NULL)
	{
		appendStringInfoString(&sql, " AND ");
		append_bound(&sql, walk, nwalk, 1, true, builtin);
	}
	if (!last)
	{
		appendStringInfoString(&sql, " AND ");
		append_bound(&sql, walk, nwalk, nwalk + 1, false, builtin);
	}
	appendStringInfo(&sql, "%s%s", order.data, guarded ? "" : " FOR SHARE OF t");
	if (SPI_execute_with_args(sql.data, 2 * nwalk, argtypes, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading a snapshot chunk failed");
	tuptable = SPI_tuptable;
	*nrows = SPI_processed;

	/* the rows without tableoid, as a row type (the outbox format needs one) */
	ncols = tuptable->tupdesc->natts - 1;
	rowdesc = CreateTemplateTupleDesc(ncols);
	for (int i = 1; i <= ncols; i++)
		TupleDescCopyEntry(rowdesc, i, tuptable->tupdesc, i);
	rowdesc = BlessTupleDesc(rowdesc);

	/*
	 * The events with the database's settings of a value's text; the
	 * bound, which writers parse in their own settings, was written and
	 * read in the worker's
	 */
	nestlevel = database_text_settings();
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "outbox snapshot row",
								   ALLOCSET_DEFAULT_SIZES);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		Datum	   *rowvalues = palloc((ncols + 1) * sizeof(Datum));
		bool	   *rownulls = palloc((ncols + 1) * sizeof(bool));
		CaptureTable *table;
		HeapTuple	row;

		heap_deform_tuple(tuptable->vals[r], tuptable->tupdesc, rowvalues, rownulls);
		table = leaf_table(leaves, &nleaves, DatumGetObjectId(rowvalues[ncols]), rel, config,
						   rowdesc);
		oldcxt = MemoryContextSwitchTo(rowcxt);
		row = heap_form_tuple(rowdesc, rowvalues, rownulls);
		/* the markers of Debezium's snapshot of one table: first, true..., last */
		outbox_capture_event(ext, config, table, 'r', NULL, row,
							 last && r == SPI_processed - 1 ? "last" :
							 last_key == NULL && r == 0 ? "first" : "true");
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(rowcxt);
	}
	MemoryContextDelete(rowcxt);
	AtEOXact_GUC(false, nestlevel);
	return last;
}

/*
 * Do the arguments of two triggers say the same?
 */
static bool
same_args(char **a, int na, char **b, int nb)
{
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++)
		if (a[i] == NULL || b[i] == NULL || strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

/*
 * Cancel the snapshot of the locked state row of relid, saying why.
 */
static void
cancel(const OutboxExtension *ext, Oid relid, const char *why)
{
	Datum		values[2] = {ObjectIdGetDatum(relid), (Datum) 0};

	ereport(LOG,
			(errmsg("snapshot of the table with OID %u cancelled: %s", relid, why)));
	outbox_run_as_owner(ext, &forget_plan, values, " n", -1);
}

/*
 * Is a snapshot not finished, due now or later?  What an idle worker asks
 * before it gives its slot back.
 */
bool
outbox_snapshot_unfinished(const OutboxExtension *ext)
{
	bool		unfinished;

	if (ext->version < OUTBOX_VERSION(1, 2))
		return false;
	SPI_connect();
	unfinished = outbox_run_as_owner(ext, ext->version >= OUTBOX_VERSION(1, 3) ?
									 &unfinished13_plan : &unfinished_plan, NULL, NULL, -1) > 0;
	SPI_finish();
	return unfinished;
}

/*
 * The worker stops: a chunk ran twice its time (a table owner's code may
 * catch the cancel).  A timeout handler, as die() is a signal handler.
 */
static void
chunk_ran_too_long(void)
{
	InterruptPending = true;
	ProcDiePending = true;
	SetLatch(MyLatch);
}

/*
 * Find the snapshot due first, if any, for a chunk in the next
 * transaction: returns whether there is one to take, and its table in
 * chunk->relid.  At 1.3 the chunk's start is noted, for the caller to
 * commit before the chunk runs; a chunk noted and never finished (the
 * worker stopped in it) is taken as one that ran out of time, and the
 * snapshot waits its turn.
 */
bool
outbox_snapshot_start(const OutboxExtension *ext, OutboxSnapshotChunk *chunk)
{
	Datum		values[1] = {Int32GetDatum(CHUNK_ROWS)};
	bool		isnull;
	bool		take = true;

	memset(chunk, 0, sizeof(*chunk));
	if (ext->version < OUTBOX_VERSION(1, 2))
		return false;
	SPI_connect();
	if (outbox_run_as_owner(ext, ext->version >= OUTBOX_VERSION(1, 3) ? &pick13_plan : &pick_plan,
							values, NULL, -1) == 0)
	{
		SPI_finish();
		return false;
	}
	chunk->relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
	if (ext->version >= OUTBOX_VERSION(1, 3))
	{
		Datum		relid = ObjectIdGetDatum(chunk->relid);
		bool		unfinished = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 2, &isnull));
		int			rows = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 3, &isnull));

		if (unfinished)
			ran_out_of_time(ext, chunk->relid, rows,
							psprintf("the worker stopped during a chunk of %d rows (it was terminated, or the chunk ran past %d ms)",
									 rows, 2 * CHUNK_MS),
							0);
		else
			outbox_run_as_owner(ext, &begin13_plan, &relid, NULL, -1);
		take = !unfinished;
	}
	else
	{
		Datum		begin[2] = {ObjectIdGetDatum(chunk->relid), Float8GetDatum(SLOW_RETRY_MS)};

		outbox_run_as_owner(ext, &begin12_plan, begin, NULL, -1);
	}
	SPI_finish();
	return take;
}

/*
 * Take the next chunk of rows of the snapshot of chunk->relid, which
 * outbox_snapshot_start found, in the caller's transaction (the
 * worker's).  Returns whether there may be more to take right away;
 * *chunk says what was done.  A table that is locked by DDL is left for a
 * later turn; one that is gone, or no longer captured as it was when the
 * snapshot was asked for, has its snapshot cancelled; one whose key's
 * type, collation or order changed, or whose key is no longer unique, has
 * its snapshot failed.
 */
bool
outbox_snapshot_chunk(const OutboxExtension *ext, OutboxSnapshotChunk *chunk)
{
	bool		guarded = ext->version >= OUTBOX_VERSION(1, 3);
	Oid			relid = chunk->relid;
	HeapTuple	state;
	TupleDesc	statedesc;
	bool		isnull;
	char	  **state_args;
	int			nstate_args;
	char	  **walk_names;
	int			nwalk;
	char	  **last_key = NULL;
	char	  **types = NULL;
	int			ntypes = 0;
	int			rows;
	Relation	rel;
	char	  **args;
	int			nargs;
	CaptureConfig config;
	WalkColumn *walk;
	int			changed;
	char	   *now;
	Oid			save_userid;
	int			save_sec;
	int			save_nestlevel;
	char	  **bound;
	bool		last;
	Datum		values[6];
	char		nulls[7] = "      ";

	SPI_connect();
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int32GetDatum(CHUNK_ROWS);
	if (outbox_run_as_owner(ext, guarded ? &state13_plan : &state_plan, values, NULL, -1) == 0)
	{
		/* finished, cancelled or failed meanwhile, or asked for again */
		SPI_finish();
		return false;
	}
	state = SPI_tuptable->vals[0];
	statedesc = SPI_tuptable->tupdesc;
	state_args = text_array_items(SPI_getbinval(state, statedesc, 1, &isnull), &nstate_args);
	walk_names = text_array_items(SPI_getbinval(state, statedesc, 2, &isnull), &nwalk);
	{
		Datum		key = SPI_getbinval(state, statedesc, 3, &isnull);
		int			nkey;

		if (!isnull)
		{
			last_key = text_array_items(key, &nkey);
			if (nkey != nwalk)
				elog(ERROR, "the last key of a snapshot has %d columns, expected %d", nkey, nwalk);
		}
		key = SPI_getbinval(state, statedesc, 4, &isnull);
		if (!isnull)
			types = text_array_items(key, &ntypes);
	}
	rows = DatumGetInt32(SPI_getbinval(state, statedesc, 5, &isnull));
	{
		char	   *relname = get_rel_name(relid);

		pgstat_report_activity(STATE_RUNNING,
							   relname ? psprintf("taking a snapshot of table \"%s\"", relname) :
							   "taking a snapshot");
	}

	/* the table: busy with DDL, gone, or no longer captured as it was? */
	if (!ConditionalLockRelationOid(relid, RowShareLock))
	{
		if (guarded)
			outbox_run_as_owner(ext, &end13_plan, values, NULL, -1);
		SPI_finish();
		return false;
	}
	rel = try_table_open(relid, NoLock);
	if (rel == NULL)
	{
		cancel(ext, relid, "the table was dropped");
		SPI_finish();
		return true;
	}
	args = outbox_trigger_args(ext, rel, CAPTURE_TRIGGER, &nargs);
	if (args == NULL || !same_args(args, nargs, state_args, nstate_args))
	{
		cancel(ext, relid, "its capture trigger was dropped or changed");
		table_close(rel, NoLock);
		SPI_finish();
		return true;
	}

	/* the key: the same order as when the snapshot was asked for, unique */
	changed = changed_key(rel, walk_names, nwalk, types, ntypes, &now);
	if (changed >= 0 || !unique_key(rel, walk_names, nwalk))
	{
		give_up(ext, relid,
				changed < 0 ?
				"its key columns are no longer NOT NULL and the columns of a unique index; ask for the snapshot again" :
				now == NULL ?
				psprintf("its key column \"%s\" is gone", walk_names[changed]) :
				psprintf("its key column \"%s\" is now %s, it was %s: the rows read so far were read in another order; ask for the snapshot again",
						 walk_names[changed], now,
						 changed < ntypes && types[changed] ? types[changed] : "not noted"));
		table_close(rel, NoLock);
		SPI_finish();
		return true;
	}
	outbox_capture_config(nargs, args, &config);
	walk = palloc(nwalk * sizeof(WalkColumn));
	types = palloc(nwalk * sizeof(char *));
	for (int i = 0; i < nwalk; i++)
	{
		AttrNumber	attnum = get_attnum(relid, walk_names[i]);
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
		TypeCacheEntry *typentry;

		walk[i].name = (char *) quote_identifier(walk_names[i]);
		walk[i].typid = attr->atttypid;
		walk[i].typmod = attr->atttypmod;
		types[i] = key_type(rel, walk_names[i]);
		typentry = lookup_type_cache(attr->atttypid, TYPECACHE_BTREE_OPFAMILY);
		for (int s = 1; s <= BTMaxStrategyNumber; s++)
		{
			walk[i].ops[s] = get_opfamily_member(typentry->btree_opf, typentry->btree_opintype,
												 typentry->btree_opintype, s);
			if (!OidIsValid(walk[i].ops[s]))
				elog(ERROR, "operator family %u has no operator of strategy %d",
					 typentry->btree_opf, s);
		}
	}

	/*
	 * As the table's owner, restricted, waiting a bounded time for locks,
	 * in a bounded time: the statements are cancelled after CHUNK_MS, and
	 * the worker stops after twice that.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("lock_timeout",
							 guarded ? SNAPSHOT_LOCK_TIMEOUT : SNAPSHOT_ROW_LOCK_TIMEOUT,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (chunk_stop_timeout == MAX_TIMEOUTS)
		chunk_stop_timeout = RegisterTimeout(USER_TIMEOUT, chunk_ran_too_long);
	enable_timeout_after(STATEMENT_TIMEOUT, CHUNK_MS);
	enable_timeout_after(chunk_stop_timeout, 2 * CHUNK_MS);
	PG_TRY();
	{
		if (guarded)
			lock_snapshot(ext, relid, ExclusiveLock);
		last = read_chunk(ext, rel, &config, walk, nwalk, last_key, rows, guarded, &bound,
						  &chunk->rows);
	}
	PG_FINALLY();
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		disable_timeout(chunk_stop_timeout, false);
	}
	PG_END_TRY();
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);

	values[0] = ObjectIdGetDatum(relid);
	values[1] = bound ? text_array(bound, nwalk) : (Datum) 0;
	if (bound == NULL)
		nulls[1] = 'n';
	values[2] = Int64GetDatum(chunk->rows);
	values[3] = BoolGetDatum(last);
	values[4] = Int32GetDatum(rows);
	values[5] = text_array(types, nwalk);
	outbox_run_as_owner(ext, guarded ? &progress13_plan : &progress_plan, values, nulls, -1);
	chunk->finished = last;
	table_close(rel, NoLock);
	SPI_finish();
	return !last;
}
