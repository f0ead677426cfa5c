/*-------------------------------------------------------------------------
 *
 * utility.c
 *		What every backend does for the launcher, the workers and the
 *		extension's safety: the ProcessUtility hook (workers restarted when
 *		their settings change, drops refused while events are undelivered,
 *		a database freed for the statements that need it), the
 *		post-parse-analyze and object access hooks, and the
 *		end-of-transaction callback that does at commit what they asked.
 *		docs/design.md, "The hooks of every backend", says what each
 *		refuses and why.
 *
 * src/queue/utility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/analyze.h"
#include "storage/lock.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/catalog.h"
#include "launcher/launcher.h"
#include "queue/operator.h"
#include "queue/utility.h"

static ProcessUtility_hook_type prev_process_utility = NULL;
static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;
static object_access_hook_type prev_object_access = NULL;

/* asked of the current transaction, done at commit */
#define MAX_RESTARTS 8
static bool extension_created = false;
static struct
{
	Oid			database;		/* InvalidOid: every one */
	Oid			role;			/* InvalidOid: any */
}			restarts[MAX_RESTARTS];
static int	nrestarts = 0;
/* the database DROP DATABASE works on, served again if it fails */
static Oid	held_database = InvalidOid;
/* the extension whose drop the current statement has counted events for */
static Oid	drop_counted = InvalidOid;
/*
 * Restart the workers of database dboid running as role roleid (either
 * InvalidOid: any) when the transaction commits.
 */
static void
restart_at_commit(Oid dboid, Oid roleid)
{
	for (int i = 0; i < nrestarts; i++)
		if (restarts[i].database == dboid && restarts[i].role == roleid)
			return;
	if (nrestarts == MAX_RESTARTS)
	{
		/* too many to say: every worker */
		nrestarts = 1;
		dboid = roleid = InvalidOid;
	}
	else
		nrestarts++;
	restarts[nrestarts - 1].database = dboid;
	restarts[nrestarts - 1].role = roleid;
}

/*
 * Does the statement name extension outbox?
 */
static bool
names_outbox(Node *stmt)
{
	if (IsA(stmt, CreateExtensionStmt))
		return strcmp(((CreateExtensionStmt *) stmt)->extname, "outbox") == 0;
	if (IsA(stmt, AlterExtensionStmt))
		return strcmp(((AlterExtensionStmt *) stmt)->extname, "outbox") == 0;
	if (IsA(stmt, AlterObjectSchemaStmt) &&
		((AlterObjectSchemaStmt *) stmt)->objectType == OBJECT_EXTENSION)
		return strcmp(strVal(((AlterObjectSchemaStmt *) stmt)->object), "outbox") == 0;
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		ListCell   *lc;

		foreach(lc, ((DropStmt *) stmt)->objects)
		{
			if (strcmp(strVal(lfirst(lc)), "outbox") == 0)
				return true;
		}
	}
	return false;
}

/*
 * Would the statement drop extension ext, installed here: DROP EXTENSION,
 * DROP SCHEMA ... CASCADE of its schema, DROP OWNED BY its owner?
 */
static bool
drops_extension(Node *stmt, const OutboxExtension *ext)
{
	ListCell   *lc;

	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
		return names_outbox(stmt);
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_SCHEMA &&
		((DropStmt *) stmt)->behavior == DROP_CASCADE)
	{
		char	   *schema = get_namespace_name(ext->schema);

		foreach(lc, ((DropStmt *) stmt)->objects)
		{
			if (strcmp(strVal(lfirst(lc)), schema) == 0)
				return true;
		}
	}
	if (IsA(stmt, DropOwnedStmt))
	{
		foreach(lc, ((DropOwnedStmt *) stmt)->roles)
		{
			if (get_rolespec_oid(lfirst(lc), true) == ext->owner)
				return true;
		}
	}
	return false;
}

/*
 * The error of a drop that would drop undelivered events.
 */
static void
report_undelivered(const OutboxExtension *ext, int64 undelivered)
{
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg_plural("extension outbox holds " INT64_FORMAT " event that is not delivered",
						   "extension outbox holds " INT64_FORMAT " events that are not delivered",
						   undelivered, undelivered),
			 errdetail("Dropping the extension would drop them without publishing them."),
			 ext->version < OUTBOX_VERSION(1, 2) ?
			 errhint("Let the worker publish them, or update the extension (ALTER EXTENSION outbox UPDATE) and discard them on purpose with SELECT outbox_discard(), then drop it.") :
			 errhint("Let the worker publish them, or discard them on purpose with SELECT outbox_discard(), then drop the extension.")));
}

/*
 * Refuse to rename the extension's schema: the filters with which pg_dump
 * keeps the queue (pg_extension.extcondition) name it, and every dump
 * would fail.
 */
static void
refuse_renaming_schema(Node *stmt)
{
	RenameStmt *rename = (RenameStmt *) stmt;
	OutboxExtension ext;

	if (!IsA(stmt, RenameStmt) || rename->renameType != OBJECT_SCHEMA ||
		!outbox_extension_find(&ext) ||
		get_namespace_oid(rename->subname, true) != ext.schema)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot rename schema \"%s\": it holds extension outbox", rename->subname),
			 errdetail("The filters with which pg_dump keeps the extension's events name the schema."),
			 errhint("Create the extension in a schema of the new name once its events are delivered.")));
}

/*
 * May the current role run stmt, which would drop extension ext?  What
 * PostgreSQL checks once it has locked what it drops: the owner of the
 * extension, of the schema, a role that has the rights of the owner whose
 * objects DROP OWNED BY drops.
 */
static bool
may_drop_extension(Node *stmt, const OutboxExtension *ext)
{
	if (IsA(stmt, DropOwnedStmt))
		return has_privs_of_role(GetUserId(), ext->owner);
	if (((DropStmt *) stmt)->removeType == OBJECT_SCHEMA)
		return pg_namespace_ownercheck(ext->schema, GetUserId());
	return pg_extension_ownercheck(ext->oid, GetUserId());
}

/*
 * Refuse a statement that would drop the extension while events are not
 * delivered, before it runs: dropping them is what outbox_discard() is
 * for.  Counted without the drop's locks: the object access hook counts
 * again under them.  A role that may not run the statement is left to
 * PostgreSQL's refusal, before the lock below: a lock it waited for would
 * queue the worker behind it, for a statement that fails anyway.
 */
static void
refuse_dropping_events(Node *stmt)
{
	OutboxExtension ext;
	int64		undelivered;

	if (!(IsA(stmt, DropStmt) || IsA(stmt, DropOwnedStmt)) ||
		!outbox_extension_find(&ext) || outbox_extension_problem(&ext) != NULL ||
		!drops_extension(stmt, &ext) || !may_drop_extension(stmt, &ext))
		return;
	/* the worker's first lock, first: see outbox_lock_reader_table */
	outbox_lock_reader_table(&ext, AccessExclusiveLock);
	PushActiveSnapshot(GetTransactionSnapshot());
	undelivered = outbox_undelivered(&ext);
	PopActiveSnapshot();
	if (undelivered > 0)
		report_undelivered(&ext, undelivered);
}

/*
 * Refuse the drop of relation relid, whatever drops it, if it is one of
 * the extension's (or an index of one) and the extension is being dropped
 * with events that are not delivered: docs/design.md, "The hooks of every
 * backend".  Counts once a
 * statement, before the first of its relations goes.
 */
static void
refuse_dropping_relation(Oid relid)
{
	char	   *name = get_rel_name(relid);
	OutboxExtension ext;
	Oid			table = relid;
	LOCKTAG		tag;
	int64		undelivered;

	if (name == NULL || strncmp(name, "outbox_", strlen("outbox_")) != 0 ||
		!outbox_extension_find(&ext) || ext.oid == drop_counted ||
		get_rel_namespace(relid) != ext.schema ||
		(creating_extension && CurrentExtensionObject == ext.oid) ||
		outbox_extension_problem(&ext) != NULL)
		return;
	/* the drop of the extension locks it, the drop of anything else not */
	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, ExtensionRelationId, ext.oid, 0);
	if (!LockHeldByMe(&tag, AccessExclusiveLock))
		return;
	if (get_rel_relkind(relid) == RELKIND_INDEX)
		table = IndexGetRelation(relid, false);
	if (getExtensionOfObject(RelationRelationId, table) != ext.oid)
		return;

	PushActiveSnapshot(GetLatestSnapshot());
	undelivered = outbox_undelivered(&ext);
	PopActiveSnapshot();
	if (undelivered > 0)
		report_undelivered(&ext, undelivered);
	drop_counted = ext.oid;
	outbox_none_undelivered_at_commit();
}

/*
 * Refuse DROP DATABASE of database dbname, that the role may drop, while
 * it holds events that are not delivered, or may, as its slot says
 * (docs/design.md, "The hooks of every backend"), saying which.  A
 * database without the extension has no say there, and costs a look at
 * the workers' slots.
 */
static void
refuse_dropping_database(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);
	OutboxUndelivered undelivered;

	if (!OidIsValid(dboid) || !outbox_launcher_exists() ||
		!pg_database_ownercheck(dboid, GetUserId()) ||
		(undelivered = outbox_launcher_undelivered(dboid)) == OUTBOX_UNDELIVERED_NONE)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 undelivered == OUTBOX_UNDELIVERED_SOME ?
			 errmsg("database \"%s\" holds events of extension outbox that are not delivered",
					dbname) :
			 errmsg("database \"%s\" may hold events of extension outbox that are not delivered",
					dbname),
			 undelivered == OUTBOX_UNDELIVERED_SOME ?
			 errdetail("Its worker found some when it last looked: dropping the database would drop them without publishing them.") :
			 undelivered == OUTBOX_UNDELIVERED_MAYBE ?
			 errdetail("A transaction there may have added some (an enqueue, a restore, a retry, a snapshot) since its worker last looked, or since the extension was created.") :
			 errdetail("No outbox worker has looked there since the server started or since the database was last served: events from before may wait there."),
			 errhint("Let the worker publish them (outbox_stats there shows what is pending), or discard them on purpose there with SELECT outbox_discard(), then drop the database.")));
}

/*
 * Ask the worker of database dbname, if any, to leave it, when the
 * statement that needs it free of sessions is certain to run: the owner
 * runs it outside a transaction block, and no client session is connected
 * there (it would fail for them, unless it forces them out).
 */
static void
release_database(const char *dbname, bool force, ProcessUtilityContext context)
{
	Oid			dboid = get_database_oid(dbname, true);

	if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
		context != PROCESS_UTILITY_TOPLEVEL || IsTransactionBlock() ||
		!pg_database_ownercheck(dboid, GetUserId()) ||
		(!force && CountDBConnections(dboid) > 0))
		return;
	outbox_launcher_hold_database(dboid, true);
	held_database = dboid;
}

/*
 * Note what a statement that needs a database free of sessions asks.
 */
static void
note_database_statement(Node *stmt, ProcessUtilityContext context)
{
	if (IsA(stmt, DropdbStmt))
	{
		DropdbStmt *drop = (DropdbStmt *) stmt;
		bool		force = false;
		ListCell   *lc;

		foreach(lc, drop->options)
			force |= strcmp(((DefElem *) lfirst(lc))->defname, "force") == 0;
		refuse_dropping_database(drop->dbname);
		release_database(drop->dbname, force, context);
	}
	else if (IsA(stmt, RenameStmt) &&
			 ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		release_database(((RenameStmt *) stmt)->subname, false, context);
	else if (IsA(stmt, CreatedbStmt))
	{
		ListCell   *lc;

		foreach(lc, ((CreatedbStmt *) stmt)->options)
		{
			DefElem    *option = (DefElem *) lfirst(lc);

			if (strcmp(option->defname, "template") == 0 && option->arg != NULL)
				release_database(defGetString(option), false, context);
		}
	}
}

/*
 * Is name an outbox.* setting that a worker uses?  outbox.headers is the
 * sessions' own.
 */
static bool
worker_setting(const char *name)
{
	return name != NULL && strncmp(name, "outbox.", strlen("outbox.")) == 0 &&
		strcmp(name, "outbox.headers") != 0;
}

/*
 * Does pg_db_role_setting hold a setting a worker uses for database dboid
 * and role roleid (InvalidOid for settings of every role or database)?
 */
static bool
has_worker_settings(Oid dboid, Oid roleid)
{
	Relation	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(dboid));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(roleid));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, NULL, 2, keys);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
										  RelationGetDescr(rel), &isnull);
		Datum	   *items;
		int			n;

		if (isnull)
			continue;
		deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false, TYPALIGN_INT,
						  &items, NULL, &n);
		for (int i = 0; i < n && !found; i++)
		{
			char	   *item = TextDatumGetCString(items[i]);
			char	   *eq = strchr(item, '=');

			if (eq != NULL)
				*eq = '\0';
			found = worker_setting(item);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Would setstmt change a setting that the worker of database dboid as role
 * roleid uses?
 */
static bool
changes_worker_setting(VariableSetStmt *setstmt, Oid dboid, Oid roleid)
{
	if (setstmt->kind == VAR_RESET_ALL)
		return has_worker_settings(dboid, roleid);
	return worker_setting(setstmt->name);
}

/*
 * Before a statement runs: refuse it, or note what must happen for it.
 * Returns the workers it will ask to restart, if it succeeds, in *dboid and
 * *roleid (InvalidOid: any); false if none.
 */
static bool
before_statement(Node *stmt, ProcessUtilityContext context, Oid *dboid, Oid *roleid)
{
	*dboid = InvalidOid;
	*roleid = InvalidOid;
	refuse_dropping_events(stmt);
	refuse_renaming_schema(stmt);
	note_database_statement(stmt, context);

	if (IsA(stmt, TransactionStmt) &&
		((TransactionStmt *) stmt)->kind == TRANS_STMT_COMMIT_PREPARED)
		outbox_wake_at_commit();
	else if (names_outbox(stmt))
	{
		/*
		 * CREATE EXTENSION IF NOT EXISTS of the extension that exists does
		 * nothing, and any role may run it
		 */
		if (IsA(stmt, CreateExtensionStmt) &&
			OidIsValid(get_extension_oid("outbox", true)))
			return false;
		*dboid = MyDatabaseId;
		return true;
	}
	else if (IsA(stmt, AlterDatabaseSetStmt))
	{
		AlterDatabaseSetStmt *alter = (AlterDatabaseSetStmt *) stmt;

		*dboid = get_database_oid(alter->dbname, true);
		return OidIsValid(*dboid) && changes_worker_setting(alter->setstmt, *dboid, InvalidOid);
	}
	else if (IsA(stmt, AlterRoleSetStmt))
	{
		AlterRoleSetStmt *alter = (AlterRoleSetStmt *) stmt;

		if (alter->database != NULL)
			*dboid = get_database_oid(alter->database, true);
		if (alter->role != NULL)
			*roleid = get_rolespec_oid(alter->role, true);
		return (alter->database == NULL || OidIsValid(*dboid)) &&
			(alter->role == NULL || OidIsValid(*roleid)) &&
			changes_worker_setting(alter->setstmt, *dboid, *roleid);
	}
	return false;
}

static void guard_relation(Oid relid);

/*
 * Does the statement analyze queries of its own, which the post-parse-
 * analyze hook does not see?
 */
static bool
analyzes_unseen_queries(Node *stmt)
{
	return IsA(stmt, RuleStmt) || IsA(stmt, CreatePolicyStmt) ||
		IsA(stmt, AlterPolicyStmt) ||
		(IsA(stmt, CreateFunctionStmt) && ((CreateFunctionStmt *) stmt)->sql_body != NULL);
}

/*
 * Refuse if this backend holds a lock on a relation of the extension on
 * which the role has no right (guard_relation).
 */
static void
guard_locks_held(void)
{
	LockData   *locks = GetLockStatusData();

	for (int i = 0; i < locks->nelements; i++)
	{
		LockInstanceData *lock = &locks->locks[i];

		if (lock->pid == MyProcPid && lock->holdMask != 0 &&
			lock->locktag.locktag_type == LOCKTAG_RELATION &&
			lock->locktag.locktag_field1 == MyDatabaseId)
			guard_relation(lock->locktag.locktag_field2);
	}
}

static void
outbox_process_utility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	Oid			dboid;
	Oid			roleid;
	bool		restart;

	drop_counted = InvalidOid;
	restart = before_statement(stmt, context, &dboid, &roleid);

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	if (analyzes_unseen_queries(stmt))
		guard_locks_held();
	/* it ran, and the role was allowed to run it */
	if (restart)
		restart_at_commit(dboid, roleid);
	if (restart && IsA(stmt, CreateExtensionStmt))
	{
		extension_created = true;
		outbox_launcher_check_room();
	}
}

/*
 * Refuse a statement that names, on a relation of the extension, a role
 * with no right at all on it: docs/design.md, "The hooks of every backend".
 */
static void
guard_relation(Oid relid)
{
	char	   *name = get_rel_name(relid);
	OutboxExtension ext;

	if (name == NULL || strncmp(name, "outbox_", strlen("outbox_")) != 0 ||
		!outbox_extension_find(&ext) || get_rel_namespace(relid) != ext.schema)
		return;
	if (pg_class_aclmask(relid, GetUserId(), ACL_ALL_RIGHTS_RELATION, ACLMASK_ANY) == 0)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)), name);
}

static bool
guard_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
			guard_relation(rte->relid);
		return false;
	}
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;

		/* EXPLAIN, CREATE TABLE AS and DECLARE hold an analyzed query */
		if (query->utilityStmt != NULL)
		{
			Node	   *inner = query->utilityStmt;

			if (IsA(inner, ExplainStmt))
				return guard_walker(((ExplainStmt *) inner)->query, context);
			if (IsA(inner, CreateTableAsStmt))
				return guard_walker(((CreateTableAsStmt *) inner)->query, context);
			if (IsA(inner, DeclareCursorStmt))
				return guard_walker(((DeclareCursorStmt *) inner)->query, context);
			return false;
		}
		return query_tree_walker(query, guard_walker, context, QTW_EXAMINE_RTES_BEFORE);
	}
	return expression_tree_walker(node, guard_walker, context);
}

static void
outbox_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	if (IsTransactionState())
		(void) guard_walker((Node *) query, NULL);
}

static void
outbox_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					 int subId, void *arg)
{
	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	/* not what PostgreSQL drops of its own accord (REINDEX CONCURRENTLY) */
	if (access == OAT_DROP && classId == RelationRelationId && subId == 0 &&
		!(((ObjectAccessDrop *) arg)->dropflags & PERFORM_DELETION_INTERNAL) &&
		IsTransactionState())
		refuse_dropping_relation(objectId);
}

static void
outbox_xact_callback(XactEvent event, void *arg)
{
	/* before others see the extension, and before a commit there adds events */
	if (event == XACT_EVENT_PRE_COMMIT && extension_created && outbox_launcher_exists())
		outbox_launcher_extension_born(MyDatabaseId);
	outbox_launcher_at_eoxact(event);
	if (event == XACT_EVENT_COMMIT && outbox_launcher_exists())
	{
		for (int i = 0; i < nrestarts; i++)
			outbox_launcher_restart_workers(restarts[i].database, restarts[i].role);
		if (extension_created)
			outbox_launcher_extension_created(MyDatabaseId);
	}
	if (event == XACT_EVENT_ABORT && OidIsValid(held_database))
		outbox_launcher_hold_database(held_database, false);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		extension_created = false;
		nrestarts = 0;
		held_database = InvalidOid;
		drop_counted = InvalidOid;
	}
}

/*
 * Register the end-of-transaction callback, and, where the library is
 * preloaded, the hooks; called once per process from _PG_init.
 */
void
outbox_utility_init(bool preloaded)
{
	RegisterXactCallback(outbox_xact_callback, NULL);
	if (!preloaded)
		return;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = outbox_process_utility;
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = outbox_post_parse_analyze;
	prev_object_access = object_access_hook;
	object_access_hook = outbox_object_access;
}
