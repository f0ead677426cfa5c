/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *		Snapshots on attach: outbox_attach(..., snapshot => true) asks for
 *		one, and the worker publishes the rows the table has as read (r)
 *		events, a chunk between two batches, while the capture trigger goes
 *		on publishing the changes.
 *
 * The request is a row of outbox_snapshots_state, written in the
 * attaching transaction, after the triggers: whatever changes the table
 * once the request is seen is captured.  The worker then takes one chunk
 * at a time, each in a short transaction of its own:
 *
 *		SELECT <key> FROM t WHERE (<key>) > (<last key>) ORDER BY <key>
 *			OFFSET n - 1 LIMIT 2;							-- the bound
 *		SELECT t.* FROM t WHERE (<key>) > (<last key>) AND (<key>) <= (<bound>)
 *			ORDER BY <key> FOR SHARE;
 *
 * one r event per row, and the bound saved as the last key, in the same
 * transaction.  The key is the primary key (or NOT NULL key columns).  A
 * chunk with no row after its bound (n rows or fewer left) is the last: it
 * reads to the end, its last row says so (source.snapshot "last"), and the
 * snapshot is finished.
 *
 * Why a consumer that applies every event in order, by key (r, c and u as
 * an upsert of the whole row, d as a delete), ends with the table's rows:
 * FOR SHARE makes the chunk wait for a transaction that changes one of its
 * rows to end, and then read the row as that transaction left it; and a
 * transaction that changes a row the chunk locked waits for the chunk to
 * commit.  So the r event of a row follows, in commit order (the order the
 * worker publishes in), every change of the row it saw, and precedes every
 * change it did not see, each of which carries the whole row.  A row that
 * a chunk misses was inserted, or changed its key, after the chunk's
 * statement began: its own events carry it.  Writers wait for a chunk for
 * as long as it takes to read n rows and write their events, never for the
 * whole snapshot; the chunk gives up on a row lock after a second
 * (lock_timeout) and is tried again, so a long transaction delays the
 * snapshot, not the publishing.
 *
 * The chunk reads the table and builds the events as the table's owner, in
 * a security-restricted context, the way maintenance commands run code of
 * a table's owner: the worker, whose role is the extension's owner, never
 * runs the table's code (operators and output functions of its types) with
 * its own rights.  The statements on the extension's table go through
 * saved plans (catalog.c), as the extension's owner.
 *
 * A snapshot ends when its table is detached (the row is deleted), when
 * the table or its capture trigger goes or changes (cancelled), or when
 * it is asked for again (it starts over).
 *
 * src/snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "optimizer/plancat.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "capture.h"
#include "catalog.h"
#include "snapshot.h"
#include "utility.h"

/* how long a chunk waits for a row lock before it is tried again */
#define SNAPSHOT_LOCK_TIMEOUT "1s"

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

/* the snapshot of a table, unless it was asked for with trigger arguments $2 */
static OutboxPlan forget_plan = {
	"DELETE FROM %1$s.outbox_snapshots_state s"
	" WHERE s.relid = $1 AND ($2 IS NULL OR s.trigger_args IS DISTINCT FROM $2)",
	2, {OIDOID, TEXTARRAYOID}
};

/* the snapshot to take a chunk of, locked */
static OutboxPlan pick_plan = {
	"SELECT s.relid, s.trigger_args, s.walk_columns, s.last_key"
	"  FROM %1$s.outbox_snapshots_state s"
	" WHERE s.finished IS NULL"
	"   AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= now())"
	" ORDER BY s.started, s.relid"
	" LIMIT 1"
	" FOR UPDATE SKIP LOCKED",
	0, {InvalidOid}
};

static OutboxPlan unfinished_plan = {
	"SELECT FROM %1$s.outbox_snapshots_state s WHERE s.finished IS NULL LIMIT 1"
};

static OutboxPlan progress_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_key = coalesce($2, s.last_key), rows_done = s.rows_done + $3,"
	"       finished = CASE WHEN $4 THEN now() END,"
	"       last_error = NULL, next_attempt_at = NULL"
	" WHERE s.relid = $1",
	4, {OIDOID, TEXTARRAYOID, INT8OID, BOOLOID}
};

static OutboxPlan failed_plan = {
	"UPDATE %1$s.outbox_snapshots_state s"
	"   SET last_error = $2, next_attempt_at = now() + $3 * interval '1 millisecond'"
	" WHERE s.relid = $1 AND s.finished IS NULL",
	3, {OIDOID, TEXTOID, FLOAT8OID}
};

/*
 * Run a saved plan as the extension's owner (the caller may have no right
 * on the extension's tables: the statement is the extension's own); nulls
 * as SPI takes them, or NULL.  The caller is connected to SPI.
 */
static uint64
run_plan(const OutboxExtension *ext, OutboxPlan *plan, Datum *values, const char *nulls)
{
	Oid			save_userid;
	int			save_sec;
	int			ret;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(ext->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	ret = SPI_execute_plan(outbox_plan(ext, plan), values, nulls, false, 0);
	SetUserIdAndSecContext(save_userid, save_sec);
	if (ret < 0)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	return SPI_processed;
}

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
 * Ask for a snapshot of rel, captured with trigger arguments args, read in
 * the order of columns walk; one asked for before starts over.  The worker
 * is woken when the transaction commits.
 */
void
outbox_snapshot_request(const OutboxExtension *ext, Relation rel, const char *format,
						const char *topic, char **args, int nargs, char **walk, int nwalk)
{
	Datum		values[6];

	values[0] = ObjectIdGetDatum(RelationGetRelid(rel));
	values[1] = CStringGetTextDatum(topic);
	values[2] = CStringGetTextDatum(format);
	values[3] = text_array(args, nargs);
	values[4] = text_array(walk, nwalk);
	values[5] = Int64GetDatum(estimate_rows(rel));
	SPI_connect();
	run_plan(ext, &request_plan, values, NULL);
	SPI_finish();
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
	run_plan(ext, &forget_plan, values, nulls);
	SPI_finish();
}

/*
 * Record that a chunk of the snapshot of relid failed: it is tried again
 * after retry_ms.  Called by the worker, in a new transaction.
 */
void
outbox_snapshot_failed(const OutboxExtension *ext, Oid relid, const char *error, int retry_ms)
{
	Datum		values[3];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(error);
	values[2] = Float8GetDatum(retry_ms);
	SPI_connect();
	run_plan(ext, &failed_plan, values, NULL);
	SPI_finish();
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
 * Read the next chunk of rows and store their events, as the table's
 * owner in a restricted context.  Returns whether it was the last; the
 * bound (the last key read) goes in *bound, as text.
 */
static bool
read_chunk(const OutboxExtension *ext, Relation rel, const CaptureConfig *config,
		   WalkColumn *walk, int nwalk, char **last_key, int rows, char ***bound,
		   int64 *nrows)
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
	appendStringInfo(&sql, "%s FOR SHARE OF t", order.data);
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
		outbox_capture_event(ext, config, table, 'r', NULL, row,
							 last && r == SPI_processed - 1 ? "last" : "true");
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(rowcxt);
	}
	MemoryContextDelete(rowcxt);
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
	run_plan(ext, &forget_plan, values, " n");
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
	unfinished = run_plan(ext, &unfinished_plan, NULL, NULL) > 0;
	SPI_finish();
	return unfinished;
}

/*
 * Take the next chunk of rows of the snapshot due first, if any, in the
 * caller's transaction (the worker's).  Returns whether there may be more
 * to take right away; *chunk says what was done.  A table that is locked
 * by DDL is left for a later turn; one that is gone, or no longer captured
 * as it was when the snapshot was asked for, has its snapshot cancelled.
 */
bool
outbox_snapshot_chunk(const OutboxExtension *ext, int rows, OutboxSnapshotChunk *chunk)
{
	HeapTuple	state;
	TupleDesc	statedesc;
	Oid			relid;
	bool		isnull;
	char	  **state_args;
	int			nstate_args;
	char	  **walk_names;
	int			nwalk;
	char	  **last_key = NULL;
	Relation	rel;
	char	  **args;
	int			nargs;
	CaptureConfig config;
	WalkColumn *walk;
	Oid			save_userid;
	int			save_sec;
	int			save_nestlevel;
	char	  **bound;
	bool		last;
	Datum		values[4];
	char		nulls[5] = "    ";

	memset(chunk, 0, sizeof(*chunk));
	if (ext->version < OUTBOX_VERSION(1, 2))
		return false;
	SPI_connect();
	if (run_plan(ext, &pick_plan, NULL, NULL) == 0)
	{
		SPI_finish();
		return false;
	}
	state = SPI_tuptable->vals[0];
	statedesc = SPI_tuptable->tupdesc;
	relid = DatumGetObjectId(SPI_getbinval(state, statedesc, 1, &isnull));
	state_args = text_array_items(SPI_getbinval(state, statedesc, 2, &isnull), &nstate_args);
	walk_names = text_array_items(SPI_getbinval(state, statedesc, 3, &isnull), &nwalk);
	{
		Datum		key = SPI_getbinval(state, statedesc, 4, &isnull);
		int			nkey;

		if (!isnull)
		{
			last_key = text_array_items(key, &nkey);
			if (nkey != nwalk)
				elog(ERROR, "the last key of a snapshot has %d columns, expected %d", nkey, nwalk);
		}
	}
	chunk->relid = relid;
	{
		char	   *relname = get_rel_name(relid);

		pgstat_report_activity(STATE_RUNNING,
							   relname ? psprintf("taking a snapshot of table \"%s\"", relname) :
							   "taking a snapshot");
	}

	/* the table: busy with DDL, gone, or no longer captured as it was? */
	if (!ConditionalLockRelationOid(relid, RowShareLock))
	{
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
	outbox_capture_config(nargs, args, &config);
	walk = palloc(nwalk * sizeof(WalkColumn));
	for (int i = 0; i < nwalk; i++)
	{
		AttrNumber	attnum = get_attnum(relid, walk_names[i]);
		Form_pg_attribute attr;
		TypeCacheEntry *typentry;

		if (attnum <= 0)
		{
			cancel(ext, relid, psprintf("its key column \"%s\" is gone", walk_names[i]));
			table_close(rel, NoLock);
			SPI_finish();
			return true;
		}
		attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
		walk[i].name = (char *) quote_identifier(walk_names[i]);
		walk[i].typid = attr->atttypid;
		walk[i].typmod = attr->atttypmod;
		typentry = lookup_type_cache(attr->atttypid, TYPECACHE_BTREE_OPFAMILY);
		if (!OidIsValid(typentry->btree_opf))
			elog(ERROR, "type %s has no btree operator class", format_type_be(attr->atttypid));
		for (int s = 1; s <= BTMaxStrategyNumber; s++)
		{
			walk[i].ops[s] = get_opfamily_member(typentry->btree_opf, typentry->btree_opintype,
												 typentry->btree_opintype, s);
			if (!OidIsValid(walk[i].ops[s]))
				elog(ERROR, "operator family %u has no operator of strategy %d",
					 typentry->btree_opf, s);
		}
	}

	/* as the table's owner, restricted, waiting a bounded time for row locks */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("lock_timeout", SNAPSHOT_LOCK_TIMEOUT, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	last = read_chunk(ext, rel, &config, walk, nwalk, last_key, rows, &bound, &chunk->rows);
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);

	values[0] = ObjectIdGetDatum(relid);
	values[1] = bound ? text_array(bound, nwalk) : (Datum) 0;
	if (bound == NULL)
		nulls[1] = 'n';
	values[2] = Int64GetDatum(chunk->rows);
	values[3] = BoolGetDatum(last);
	run_plan(ext, &progress_plan, values, nulls);
	chunk->finished = last;
	table_close(rel, NoLock);
	SPI_finish();
	return !last;
}
