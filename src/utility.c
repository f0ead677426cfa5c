/*-------------------------------------------------------------------------
 *
 * utility.c
 *		A ProcessUtility hook, so that DROP DATABASE of the database the
 *		worker is connected to succeeds without WITH (FORCE).
 *
 * DROP DATABASE waits up to 5 s for the other sessions of the database to
 * go, then fails.  Before it starts waiting, the hook asks the worker to
 * stop (SIGTERM: it finishes a batch in flight, as at shutdown) and the
 * launcher not to start it again for a while (shmem.c).  Only for a role
 * that may drop the database: nobody else can make the worker restart.
 *
 * src/utility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/timestamp.h"

#include "outbox.h"

static ProcessUtility_hook_type prev_process_utility = NULL;

/*
 * Ask the worker connected to database dbname, if any, to leave it.
 */
static void
release_database(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);
	TimestampTz now = GetCurrentTimestamp();
	pid_t		pid = 0;

	if (!OidIsValid(dboid) || !pg_database_ownercheck(dboid, GetUserId()))
		return;

	SpinLockAcquire(&outbox_shared->mutex);
	outbox_shared->dropping_database = dboid;
	outbox_shared->dropping_since = now;
	if (outbox_shared->worker_database == dboid)
		pid = outbox_shared->worker_pid;
	SpinLockRelease(&outbox_shared->mutex);

	if (pid != 0)
		(void) kill(pid, SIGTERM);
}

static void
outbox_process_utility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	if (outbox_shared != NULL && IsA(pstmt->utilityStmt, DropdbStmt))
		release_database(((DropdbStmt *) pstmt->utilityStmt)->dbname);

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * Install the hook; called once per process from _PG_init, where the
 * library is preloaded.
 */
void
outbox_install_utility_hook(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = outbox_process_utility;
}
