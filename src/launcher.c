/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The outbox launcher: starts the publishing worker of outbox.database,
 *		as the role that owns the extension there, and restarts it.
 *
 * A process connects to one database as one role, for good, and the
 * extension's owner can only be read inside the database.  So the worker
 * comes in two steps, each a process the launcher starts:
 *
 * 1. the owner lookup connects as the bootstrap superuser, waits until the
 *    extension exists and its owner may log in, reading the catalogs only
 *    (no SPI, no user code), hands the owner over in shared memory and
 *    exits;
 * 2. the publishing worker connects as that owner and publishes until the
 *    extension is dropped or changes hands, then exits, and step 1 runs
 *    again.
 *
 * The launcher itself connects to no database: it reads pg_database, so
 * that a database that does not exist (yet) is waited for and reported,
 * not retried by a crashing worker.
 *
 * src/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "outbox.h"

/* how often a missing database is looked for */
#define DATABASE_CHECK_MS 5000
/* pause before a worker that exited is started again */
#define RESTART_DELAY_MS 1000
/* how long a database that DROP DATABASE works on gets no worker */
#define DROP_HOLD_MS 10000

/*
 * Register the launcher.  Called from _PG_init in the postmaster.
 */
void
outbox_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "outbox launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "outbox launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/*
 * Start the worker for database dboid: the owner lookup if owner is
 * InvalidOid, else the publishing worker as owner.  NULL if no slot is
 * free (max_worker_processes).
 */
static BackgroundWorkerHandle *
start_worker(Oid dboid, Oid owner)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "outbox worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "outbox worker", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	memcpy(worker.bgw_extra, &owner, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

/*
 * The oid of outbox.database, or InvalidOid if there is no such database
 * or it does not allow connections.  A heap scan, as autovacuum's
 * get_database_list: without a database, no index can be opened.
 */
static Oid
database_oid(void)
{
	Oid			dboid = InvalidOid;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		if (db->datallowconn && strcmp(NameStr(db->datname), outbox_database) == 0)
		{
			dboid = db->oid;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dboid;
}

/*
 * Is DROP DATABASE working on dboid (utility.c)?  It has done within
 * DROP_HOLD_MS: dropped the database, or failed and left it to the worker.
 */
static bool
being_dropped(Oid dboid)
{
	bool		dropping;

	SpinLockAcquire(&outbox_shared->mutex);
	dropping = outbox_shared->dropping_database == dboid &&
		!TimestampDifferenceExceeds(outbox_shared->dropping_since,
									GetCurrentTimestamp(), DROP_HOLD_MS);
	SpinLockRelease(&outbox_shared->mutex);
	return dropping;
}

/*
 * Main entry point of the launcher.
 */
void
outbox_launcher_main(Datum main_arg)
{
	BackgroundWorkerHandle *handle = NULL;
	TimestampTz start_at = 0;
	bool		said_missing = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("outbox launcher");

	for (;;)
	{
		long		delay = DATABASE_CHECK_MS;
		pid_t		pid;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (handle != NULL && GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
		{
			pfree(handle);
			handle = NULL;
			/* right away after a lookup that found the owner */
			start_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   outbox_shared->owner != InvalidOid ?
												   0 : RESTART_DELAY_MS);
		}

		if (handle == NULL && GetCurrentTimestamp() >= start_at)
		{
			Oid			dboid = database_oid();

			said_missing = said_missing && !OidIsValid(dboid);
			if (OidIsValid(dboid) && being_dropped(dboid))
				delay = RESTART_DELAY_MS;
			else if (!OidIsValid(dboid))
			{
				char		reason[NAMEDATALEN + 32];

				/* the launcher's memory is never reset: no palloc here */
				snprintf(reason, sizeof(reason), "database \"%s\" does not exist",
						 outbox_database);
				outbox_shmem_set_state(OUTBOX_WORKER_WAITING_FOR_DATABASE, reason);
				if (!said_missing)
					ereport(LOG,
							(errmsg("outbox: database \"%s\" does not exist, waiting for it",
									outbox_database),
							 errhint("Create the database, or set outbox.database.")));
				said_missing = true;
			}
			else if ((handle = start_worker(dboid, outbox_shmem_take_owner())) == NULL)
				outbox_shmem_set_state(OUTBOX_WORKER_STOPPED,
									   "no background worker slot is free: raise max_worker_processes");
		}
		else if (handle == NULL)
			delay = RESTART_DELAY_MS;

		/* a worker that starts or stops sets the latch (bgw_notify_pid) */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
