/*-------------------------------------------------------------------------
 *
 * utility.c
 *		A ProcessUtility hook for the statements that concern the launcher or
 *		a worker:
 *
 * - DROP DATABASE, ALTER DATABASE ... RENAME and CREATE DATABASE ...
 *   TEMPLATE wait up to 5 s for the other sessions of the database to go,
 *   then fail.  Before they start waiting, the hook asks the worker there
 *   to stop (SIGTERM: it finishes a batch in flight, as at shutdown) and
 *   the launcher not to start it again for a while (shmem.c).  Only for a
 *   role that owns the database: nobody else can make the worker restart.
 * - CREATE EXTENSION outbox tells the launcher at commit, which then starts
 *   a worker for the database at once.
 * - ALTER or DROP EXTENSION outbox, and ALTER DATABASE or ALTER ROLE ... SET
 *   of an outbox.* setting, ask the worker concerned to start again at
 *   commit, between two batches, with the extension and the settings as
 *   they are then.
 * - COMMIT PREPARED wakes the worker of the database once it is done, as
 *   the commit of a transaction that enqueued does (wakeup.c): the prepared
 *   transaction may hold events, and a wakeup costs less than finding out.
 *
 * What is asked at commit is forgotten at abort; a request that finds
 * nothing to do costs the launcher one lookup.
 *
 * src/utility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"

#include "outbox.h"

static ProcessUtility_hook_type prev_process_utility = NULL;

/* asked of the current transaction, done at commit */
static bool extension_created = false;
static bool restart_all = false;
static Oid	restart_database = InvalidOid;

/*
 * Ask the worker connected to database dbname, if any, to leave it.
 */
static void
release_database(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);

	if (OidIsValid(dboid) && pg_database_ownercheck(dboid, GetUserId()))
		outbox_shmem_restart_workers(dboid, true);
}

/*
 * Restart the worker of database dboid (InvalidOid: every worker) when
 * the transaction commits.
 */
static void
restart_at_commit(Oid dboid)
{
	if (!OidIsValid(dboid) ||
		(OidIsValid(restart_database) && restart_database != dboid))
		restart_all = true;
	restart_database = dboid;
}

/*
 * The name of the extension a statement is about, or NULL.
 */
static const char *
extension_named(Node *stmt)
{
	if (IsA(stmt, CreateExtensionStmt))
		return ((CreateExtensionStmt *) stmt)->extname;
	if (IsA(stmt, AlterExtensionStmt))
		return ((AlterExtensionStmt *) stmt)->extname;
	if (IsA(stmt, AlterObjectSchemaStmt) &&
		((AlterObjectSchemaStmt *) stmt)->objectType == OBJECT_EXTENSION)
		return strVal(((AlterObjectSchemaStmt *) stmt)->object);
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		ListCell   *lc;

		foreach(lc, ((DropStmt *) stmt)->objects)
		{
			if (strcmp(strVal(lfirst(lc)), "outbox") == 0)
				return "outbox";
		}
	}
	return NULL;
}

/*
 * Does an ALTER DATABASE or ALTER ROLE ... SET change an outbox.* setting?
 * RESET ALL removes them only for a superuser: anyone else cannot make
 * the workers start again.
 */
static bool
changes_outbox_setting(VariableSetStmt *setstmt)
{
	if (setstmt->kind == VAR_RESET_ALL)
		return superuser();
	return strncmp(setstmt->name, "outbox.", strlen("outbox.")) == 0;
}

/*
 * Note what stmt asks of the launcher or a worker.
 */
static void
note_statement(Node *stmt)
{
	const char *extension = extension_named(stmt);

	if (extension != NULL && strcmp(extension, "outbox") == 0)
	{
		extension_created |= IsA(stmt, CreateExtensionStmt);
		restart_at_commit(MyDatabaseId);
	}
	else if (IsA(stmt, TransactionStmt) &&
			 ((TransactionStmt *) stmt)->kind == TRANS_STMT_COMMIT_PREPARED)
		outbox_wake_worker_at_commit();
	else if (IsA(stmt, DropdbStmt))
		release_database(((DropdbStmt *) stmt)->dbname);
	else if (IsA(stmt, RenameStmt) &&
			 ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
		release_database(((RenameStmt *) stmt)->subname);
	else if (IsA(stmt, CreatedbStmt))
	{
		ListCell   *lc;

		foreach(lc, ((CreatedbStmt *) stmt)->options)
		{
			DefElem    *option = (DefElem *) lfirst(lc);

			if (strcmp(option->defname, "template") == 0 && option->arg != NULL)
				release_database(defGetString(option));
		}
	}
	else if (IsA(stmt, AlterDatabaseSetStmt) &&
			 changes_outbox_setting(((AlterDatabaseSetStmt *) stmt)->setstmt))
		restart_at_commit(get_database_oid(((AlterDatabaseSetStmt *) stmt)->dbname, true));
	else if (IsA(stmt, AlterRoleSetStmt) &&
			 changes_outbox_setting(((AlterRoleSetStmt *) stmt)->setstmt))
	{
		const char *dbname = ((AlterRoleSetStmt *) stmt)->database;

		restart_at_commit(dbname ? get_database_oid(dbname, true) : InvalidOid);
	}
}

static void
outbox_process_utility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	if (outbox_shared != NULL)
		note_statement(pstmt->utilityStmt);

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

static void
utility_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT)
	{
		if (restart_all || OidIsValid(restart_database))
			outbox_shmem_restart_workers(restart_all ? InvalidOid : restart_database,
										 false);
		if (extension_created)
			outbox_shmem_extension_created(MyDatabaseId);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		extension_created = false;
		restart_all = false;
		restart_database = InvalidOid;
	}
}

/*
 * Install the hook and its commit callback; called once per process from
 * _PG_init, where the library is preloaded.
 */
void
outbox_install_utility_hook(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = outbox_process_utility;
	RegisterXactCallback(utility_xact_callback, NULL);
}
