/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The outbox launcher: starts a publishing worker for every database of
 *		outbox.databases that has the extension, as the role that owns the
 *		extension there, restarts it, and stops it when the database goes.
 *
 * A process connects to one database as one role, for good, and whether
 * a database has the extension, and who owns it, can only be read inside
 * the database.  So a database is served in two steps, each a process the
 * launcher starts:
 *
 * 1. the owner lookup connects as the bootstrap superuser, reads the
 *    catalogs only (no SPI, no user code), leaves what it found in the
 *    database's slot (shmem.c) and exits: no extension (the database is
 *    left alone until CREATE EXTENSION outbox commits there, utility.c),
 *    an owner that cannot log in (looked up again every few seconds), or
 *    the owner;
 * 2. the publishing worker connects as that owner and publishes until the
 *    extension is dropped or changes hands, or it is asked to start again,
 *    then exits, and step 1 runs again.
 *
 * Lookups run one at a time; at most outbox.max_workers publishing
 * workers run at once.  A database that waits for one says so in its slot
 * and in the log, and gets one as soon as a worker exits (bgw_notify_pid
 * wakes the launcher).
 *
 * The launcher itself connects to no database: it reads pg_database, so
 * that a database created later is found and one that is dropped loses
 * its worker.
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
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "outbox.h"

/* how often pg_database is read for databases created or dropped */
#define DATABASE_CHECK_MS 5000
/* pause before a worker that exited is started again */
#define RESTART_DELAY_MS 1000
/* pause before the owner is looked up again, while it cannot log in */
#define LOOKUP_RETRY_MS 5000
/* how long a database that DROP DATABASE works on gets no worker */
#define DROP_HOLD_MS 10000

/* what a database listed in outbox.databases needs next */
typedef enum DatabaseStep
{
	STEP_LOOK_UP,				/* find whether it has the extension, and its owner */
	STEP_PUBLISH,				/* run the publishing worker as owner */
	STEP_NO_EXTENSION,			/* nothing until CREATE EXTENSION */
	STEP_MISSING,				/* named in outbox.databases, does not exist */
	STEP_GONE					/* no longer listed: forget once its worker exits */
} DatabaseStep;

typedef struct ServedDatabase
{
	Oid			oid;			/* InvalidOid for STEP_MISSING */
	NameData	name;
	DatabaseStep step;
	int			slot;			/* in outbox_shared, or -1 */
	BackgroundWorkerHandle *handle; /* the lookup or the publishing worker */
	bool		publishing;		/* handle is the publishing worker */
	Oid			owner;			/* for STEP_PUBLISH */
	TimestampTz start_at;		/* not before */
	bool		look_again;		/* CREATE EXTENSION during its lookup */
	bool		listed;			/* seen by the last read of pg_database */
	bool		said_waiting;	/* the log said why it waits */
} ServedDatabase;

/* the databases, in the launcher's TopMemoryContext */
static ServedDatabase *databases = NULL;
static int	ndatabases = 0;
static int	max_databases = 0;

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
 * Start the worker of db: the owner lookup if owner is InvalidOid, else
 * the publishing worker as owner.  NULL if no background worker slot is
 * free (max_worker_processes).
 */
static BackgroundWorkerHandle *
start_worker(ServedDatabase *db, Oid owner)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	OutboxWorkerArgs args = {db->oid, owner};

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "outbox worker for database %s",
			 NameStr(db->name));
	strlcpy(worker.bgw_type, "outbox worker", BGW_MAXLEN);
	worker.bgw_main_arg = Int32GetDatum(db->slot);
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

static ServedDatabase *
find_database(Oid oid, const char *name)
{
	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (OidIsValid(oid) ? db->oid == oid :
			(!OidIsValid(db->oid) && strcmp(NameStr(db->name), name) == 0))
			return db;
	}
	return NULL;
}

static ServedDatabase *
add_database(Oid oid, const char *name, DatabaseStep step)
{
	ServedDatabase *db;

	if (ndatabases == max_databases)
	{
		max_databases = Max(16, max_databases * 2);
		databases = databases == NULL ?
			MemoryContextAlloc(TopMemoryContext, max_databases * sizeof(ServedDatabase)) :
			repalloc(databases, max_databases * sizeof(ServedDatabase));
	}
	db = &databases[ndatabases++];
	memset(db, 0, sizeof(*db));
	db->oid = oid;
	namestrcpy(&db->name, name);
	db->step = step;
	db->slot = -1;
	db->listed = true;
	return db;
}

/*
 * Give up db's slot, if it has one.
 */
static void
release_slot(ServedDatabase *db)
{
	if (db->slot >= 0)
		outbox_shmem_release_slot(db->slot);
	db->slot = -1;
}

/*
 * Does outbox.databases list the database called name?  "*" lists every
 * database but the templates: a session connected to a template makes
 * CREATE DATABASE fail.
 */
static bool
database_wanted(const char *name, bool is_template, List *names)
{
	ListCell   *lc;

	if (strcmp(outbox_databases, "*") == 0)
		return !is_template;
	foreach(lc, names)
	{
		if (strcmp((const char *) lfirst(lc), name) == 0)
			return true;
	}
	return false;
}

/*
 * Read pg_database: add the databases of outbox.databases that are new,
 * mark those that went away, and note the names listed that do not exist.
 * A heap scan, as autovacuum's get_database_list: without a database, no
 * index can be opened.
 */
static void
read_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	List	   *names = NIL;
	ListCell   *lc;

	for (int i = 0; i < ndatabases; i++)
		databases[i].listed = false;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	if (strcmp(outbox_databases, "*") != 0)
		(void) SplitIdentifierString(pstrdup(outbox_databases), ',', &names);

	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);
		ServedDatabase *db;

		if (!form->datallowconn ||
			!database_wanted(NameStr(form->datname), form->datistemplate, names))
			continue;
		db = find_database(form->oid, NULL);
		if (db == NULL)
			db = add_database(form->oid, NameStr(form->datname), STEP_LOOK_UP);
		db->listed = true;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	/* names listed but not found: wait for them, and say so */
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		bool		found = false;
		ServedDatabase *db;

		for (int i = 0; i < ndatabases; i++)
			found |= OidIsValid(databases[i].oid) && databases[i].listed &&
				strcmp(NameStr(databases[i].name), name) == 0;
		if (found)
			continue;
		db = find_database(InvalidOid, name);
		if (db == NULL)
		{
			db = add_database(InvalidOid, name, STEP_MISSING);
			ereport(LOG,
					(errmsg("outbox: database \"%s\" does not exist or does not allow connections, waiting for it",
							name),
					 errhint("Create the database, or change outbox.databases.")));
		}
		db->listed = true;
		if (db->slot < 0)
			db->slot = outbox_shmem_claim_slot(InvalidOid, name);
		if (db->slot >= 0)
		{
			char		reason[NAMEDATALEN + 64];

			snprintf(reason, sizeof(reason), "database \"%s\" does not exist", name);
			outbox_shmem_report_waiting(db->slot,
										OUTBOX_WORKER_WAITING_FOR_DATABASE, reason);
		}
	}
	CommitTransactionCommand();

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];

		if (db->listed || db->step == STEP_GONE)
			continue;
		db->step = STEP_GONE;
		if (db->handle != NULL)
			TerminateBackgroundWorker(db->handle);
	}
}

/*
 * Forget the databases marked gone whose worker has exited.
 */
static void
forget_gone_databases(void)
{
	int			kept = 0;

	for (int i = 0; i < ndatabases; i++)
	{
		if (databases[i].step == STEP_GONE && databases[i].handle == NULL)
		{
			release_slot(&databases[i]);
			continue;
		}
		databases[kept++] = databases[i];
	}
	ndatabases = kept;
}

/*
 * Look at the databases where CREATE EXTENSION outbox committed.  Returns
 * true if pg_database must be read (a database the launcher does not know
 * yet, or too many to say).
 */
static bool
take_created(void)
{
	Oid			created[16];
	bool		overflow;
	int			n = outbox_shmem_take_created(created, lengthof(created), &overflow);
	bool		read_again = overflow;

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];
		bool		hit = overflow;

		for (int j = 0; j < n; j++)
			hit |= db->oid == created[j];
		if (hit && db->step == STEP_NO_EXTENSION)
		{
			db->step = STEP_LOOK_UP;
			db->start_at = 0;
		}
		else if (hit)
			db->look_again = true;
	}
	for (int j = 0; j < n; j++)
		read_again |= find_database(created[j], NULL) == NULL;
	return read_again;
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
 * Take note of the workers that exited, and decide what their database
 * needs next.
 */
static void
reap_workers(void)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];
		pid_t		pid;

		if (db->handle == NULL ||
			GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED)
			continue;
		pfree(db->handle);
		db->handle = NULL;
		if (db->step == STEP_GONE)
			continue;

		if (db->publishing)
		{
			db->step = STEP_LOOK_UP;
			db->start_at = TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
			continue;
		}
		switch (outbox_shmem_take_lookup(db->slot, &db->owner))
		{
			case OUTBOX_LOOKUP_FOUND:
				db->step = STEP_PUBLISH;
				db->start_at = 0;
				break;
			case OUTBOX_LOOKUP_NO_EXTENSION:
				if (db->look_again)
					break;
				db->step = STEP_NO_EXTENSION;
				release_slot(db);
				break;
			case OUTBOX_LOOKUP_CANNOT_LOG_IN:
				db->start_at = TimestampTzPlusMilliseconds(now, LOOKUP_RETRY_MS);
				break;
			case OUTBOX_LOOKUP_NONE:
				db->start_at = TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
				break;
		}
	}
}

/*
 * db waits for a worker: say why, in its slot and, once, in the log.
 */
static void
report_waiting(ServedDatabase *db, const char *reason)
{
	outbox_shmem_report_waiting(db->slot, OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT,
								reason);
	if (!db->said_waiting)
		ereport(LOG,
				(errmsg("outbox: database \"%s\" waits for a worker: %s",
						NameStr(db->name), reason)));
	db->said_waiting = true;
}

/*
 * Start the lookups and publishing workers that are due, as far as the
 * limits allow.  Returns how long until the next one is due.
 */
static long
start_workers(void)
{
	TimestampTz now = GetCurrentTimestamp();
	long		delay = DATABASE_CHECK_MS;
	int			publishing = 0;
	bool		looking_up = false;

	for (int i = 0; i < ndatabases; i++)
	{
		publishing += databases[i].handle != NULL && databases[i].publishing;
		looking_up |= databases[i].handle != NULL && !databases[i].publishing;
	}

	for (int i = 0; i < ndatabases; i++)
	{
		ServedDatabase *db = &databases[i];
		bool		publish = db->step == STEP_PUBLISH;
		char		reason[128];

		if (db->handle != NULL ||
			(db->step != STEP_LOOK_UP && db->step != STEP_PUBLISH))
			continue;
		if (db->start_at > now)
		{
			delay = Min(delay, TimestampDifferenceMilliseconds(now, db->start_at));
			continue;
		}
		if (being_dropped(db->oid) || (!publish && looking_up))
		{
			delay = Min(delay, RESTART_DELAY_MS);
			continue;
		}
		if (db->slot < 0 && (db->slot = outbox_shmem_claim_slot(db->oid, NameStr(db->name))) < 0)
		{
			if (!db->said_waiting)
				ereport(LOG,
						(errmsg("outbox: database \"%s\" waits for a worker: every slot is taken",
								NameStr(db->name)),
						 errhint("Raise outbox.max_workers.")));
			db->said_waiting = true;
			continue;
		}
		if (publish && publishing >= outbox_max_workers)
		{
			snprintf(reason, sizeof(reason),
					 "all outbox.max_workers (%d) workers are busy", outbox_max_workers);
			report_waiting(db, reason);
			continue;
		}
		db->handle = start_worker(db, publish ? db->owner : InvalidOid);
		if (db->handle == NULL)
		{
			report_waiting(db, "no background worker slot is free: raise max_worker_processes");
			db->start_at = TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
			delay = Min(delay, RESTART_DELAY_MS);
			continue;
		}
		db->publishing = publish;
		db->look_again = false;
		db->said_waiting = false;
		publishing += publish;
		looking_up |= !publish;
	}
	return delay;
}

/*
 * Main entry point of the launcher.
 */
void
outbox_launcher_main(Datum main_arg)
{
	TimestampTz next_read = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("outbox launcher");
	outbox_shmem_attach_launcher();

	for (;;)
	{
		long		delay;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			next_read = 0;
		}

		if (take_created() || GetCurrentTimestamp() >= next_read)
		{
			read_databases();
			next_read = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													DATABASE_CHECK_MS);
		}
		reap_workers();
		forget_gone_databases();
		delay = start_workers();

		/* a worker that starts or stops sets the latch (bgw_notify_pid) */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(delay, 10), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
