/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The outbox worker: owner lookup, main loop, signals, error recovery.
 *
 * Started by the launcher (launcher.c) for one database, in one of two
 * steps: look up the extension's owner, or publish as that owner.
 *
 * Each batch is one transaction: claim (row locks), make sure the claiming
 * snapshot's commits are flushed to WAL, produce, wait for every delivery
 * report, record the outcomes, commit.  An error anywhere in a batch
 * aborts it; what delivery reports said is recorded in a new transaction,
 * events without a report stay due untouched, and the worker pauses
 * (longer while errors repeat) before the next batch.  Recovery runs after
 * PG_END_TRY, so an error in it is caught like any other.
 *
 * Between batches, every 10 s, it deletes events past their retention, a
 * thousand per transaction.
 *
 * SIGTERM is a request, not an interrupt: the worker stops claiming, gives
 * the batch in flight a bounded time (kafka.c), records it and exits.
 * SIGINT (pg_cancel_backend) cancels the batch in flight only.
 *
 * src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "outbox.h"

/* pause after a failed batch (doubled while failures repeat, up to the max) */
#define ERROR_PAUSE_MS 1000
#define ERROR_PAUSE_MAX_MS 60000
/*
 * How often the extension is looked up in the catalog: DROP and ALTER
 * EXTENSION ask the worker to restart at once anyway (utility.c).
 */
#define EXTENSION_CHECK_MS 5000
/*
 * How long the producer is kept without events to publish: librdkafka's
 * threads cost about a millisecond of CPU per second even when idle, which
 * adds up over many databases.
 */
#define PRODUCER_IDLE_MS 60000
/* how often expired events are looked for, and how many go per transaction */
#define CLEANUP_INTERVAL_MS 10000
#define PURGE_BATCH_SIZE 1000

/* the batch of the current transaction, for error recovery */
static OutboxBatch *batch_in_progress = NULL;
static int	consecutive_errors = 0;
static TimestampTz next_cleanup = 0;
static TimestampTz next_extension_check = 0;
/* did the last batch find nothing, and when did one last find something */
static bool idle = false;
static TimestampTz last_events_at = 0;

static void
outbox_worker_exit(int code, Datum arg)
{
	outbox_kafka_shutdown();
}

/*
 * Report what the worker does, in shared memory and pg_stat_activity.
 */
static void
report_state(OutboxWorkerState state, const char *error, const char *activity)
{
	outbox_shmem_set_state(state, error);
	pgstat_report_activity(STATE_RUNNING, activity);
}

/*
 * Begin one unit of work: a transaction with a snapshot.
 */
static void
begin_work(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

/*
 * Commit the unit of work, report its table statistics (at most once a
 * second: pgstat's own limit) so that autovacuum sees what the worker
 * writes, and return to cxt.
 */
static void
end_work(MemoryContext cxt)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Wait for ms milliseconds, or less if the latch is set and wakeable.  A
 * reload is served on the way; a wait that is not wakeable goes on until
 * its time is up (or SIGTERM).
 */
static void
pause_for(long ms, bool wakeable)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	while (!ShutdownRequestPending)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
		int			rc;

		if (left <= 0)
			break;
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (wakeable && (rc & WL_LATCH_SET))
			break;
	}
}

/*
 * Count a recorded batch's outcomes in shared memory.
 */
static void
count_outcomes(OutboxBatch *batch)
{
	int			published = 0;
	int			failed = 0;

	for (int i = 0; i < batch->count; i++)
	{
		if (batch->events[i].outcome == OUTBOX_DELIVERED)
			published++;
		else if (batch->events[i].outcome == OUTBOX_REFUSED)
			failed++;
	}
	outbox_shmem_count_batch(published, failed);
}

/*
 * Flush WAL up to the end of the last record inserted so far: that covers
 * every commit the batch's snapshot sees, including those made with
 * synchronous_commit = off, which a crash could otherwise take back after
 * their events were published; returns the position.  The insert position
 * points past the page
 * header when a page has no record yet; no record ends there, and
 * XLogFlush cannot reach it, so step back to the page's start.
 */
static XLogRecPtr
flush_visible_commits(void)
{
	XLogRecPtr	end = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(end, wal_segment_size) == SizeOfXLogLongPHD)
		end -= SizeOfXLogLongPHD;
	else if (end % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		end -= SizeOfXLogShortPHD;
	XLogFlush(end);
	return end;
}

/*
 * With outbox.standby_slots set, how long a batch waits for the standbys
 * inside its transaction, and how long the worker then pauses, out of it,
 * before it claims again: a lagging standby costs neither a long
 * transaction nor a claim per commit.
 */
#define STANDBY_WAIT_MS 100
#define STANDBY_PAUSE_MS 200

/*
 * Make sure a producer built from the current settings exists and some
 * broker answers.  Returns false, having said so, while none does.
 */
static bool
ensure_producer(void)
{
	char	   *reason;

	outbox_kafka_configure();
	if (outbox_kafka_reachable())
		return true;

	reason = psprintf("no Kafka broker reachable at %s", outbox_brokers);
	report_state(OUTBOX_WORKER_BROKER_UNREACHABLE, reason, reason);
	if (!outbox_kafka_probe())
		return false;
	ereport(LOG,
			(errmsg("outbox: Kafka brokers reachable again, resuming")));
	return true;
}

/*
 * Run one batch in one transaction.  Returns how long to wait before the
 * next: 0 after a batch that published anything, poll_interval after an
 * empty one.  Exits when the extension is gone or has another owner, or
 * when a backend asks it to (utility.c): the launcher then looks for the
 * owner again and starts a worker with the settings as they are then.
 */
static long
run_batch(MemoryContext cxt)
{
	OutboxBatch *batch;
	TimestampTz now = GetCurrentTimestamp();
	bool		nothing_due;

	begin_work("claiming due events");
	/* the batch must outlive the transaction, for error recovery */
	MemoryContextSwitchTo(cxt);

	if (outbox_shmem_restart_requested())
	{
		ereport(LOG,
				(errmsg("outbox: the settings or the extension changed, worker restarting")));
		proc_exit(0);
	}
	if (now >= next_extension_check)
	{
		if (!outbox_extension_ready())
		{
			ereport(LOG,
					(errmsg("outbox: the extension was dropped or changed owner, worker exiting")));
			proc_exit(0);
		}
		next_extension_check = TimestampTzPlusMilliseconds(now, EXTENSION_CHECK_MS);
	}

	/* idle: a cheap look first, and no producer after a while */
	nothing_due = idle && !outbox_events_due();
	if (nothing_due && TimestampDifferenceExceeds(last_events_at, now, PRODUCER_IDLE_MS))
		outbox_kafka_shutdown();
	else if (!ensure_producer())
	{
		end_work(cxt);
		return ERROR_PAUSE_MS;
	}
	if (nothing_due)
	{
		end_work(cxt);
		outbox_shmem_set_state(OUTBOX_WORKER_IDLE, NULL);
		return outbox_poll_interval;
	}

	batch = outbox_claim_batch(outbox_batch_size);
	batch_in_progress = batch;
	if (batch->count > 0)
	{
		if (!outbox_standbys_have(flush_visible_commits(), STANDBY_WAIT_MS))
		{
			/* nothing produced: undo the claim, the events stay due */
			PopActiveSnapshot();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(cxt);
			pgstat_report_activity(STATE_IDLE, NULL);
			batch_in_progress = NULL;
			pause_for(STANDBY_PAUSE_MS, false);
			return 0;
		}
		report_state(OUTBOX_WORKER_PUBLISHING, NULL,
					 psprintf("publishing %d events", batch->count));
		outbox_kafka_publish(batch);
		pgstat_report_activity(STATE_RUNNING, "recording delivery outcomes");
		outbox_record_outcomes(batch);
	}
	end_work(cxt);
	batch_in_progress = NULL;
	consecutive_errors = 0;
	if (batch->count > 0)
		count_outcomes(batch);

	idle = batch->count == 0;
	if (!idle)
		last_events_at = now;
	outbox_shmem_set_state(OUTBOX_WORKER_IDLE, NULL);
	return idle ? outbox_poll_interval : 0;
}

/*
 * Delete one batch of expired events, in a transaction of its own, if it
 * is time to.  Returns true if there may be more to delete right away.
 * Deletes take no lock that enqueue or publishing waits for.
 */
static bool
run_cleanup(MemoryContext cxt)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		removed;

	if (now < next_cleanup)
		return false;

	begin_work("removing expired events");
	removed = outbox_purge_expired(PURGE_BATCH_SIZE);
	end_work(cxt);

	if (removed >= PURGE_BATCH_SIZE)
		return true;

	begin_work("rotating the log");
	outbox_shmem_set_current_log(outbox_rotate_log());
	end_work(cxt);
	next_cleanup = TimestampTzPlusMilliseconds(now, CLEANUP_INTERVAL_MS);
	return false;
}

/*
 * Record, in a new transaction, what delivery reports said of a batch
 * whose transaction failed.  Events without a report are left as they
 * were, due again untouched: only a delivery report counts an attempt.
 */
static void
record_failed_batch(MemoryContext cxt, OutboxBatch *batch)
{
	begin_work("recording delivery outcomes");
	if (outbox_extension_ready())
		outbox_record_outcomes(batch);
	end_work(cxt);
	count_outcomes(batch);
}

/*
 * Clean up after an error in the loop: abort the transaction, forget the
 * batch in flight, say why, and record what is known of the batch.  Called
 * outside any PG_TRY; an error while recording is caught here and leaves
 * the batch's rows due.  Returns how long to pause: longer while errors
 * repeat, so that a persistent one neither spins nor floods the log.
 */
static long
recover_from_error(MemoryContext cxt, ErrorData *edata)
{
	OutboxBatch *batch = batch_in_progress;

	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	outbox_kafka_forget_batch();
	batch_in_progress = NULL;

	ereport(LOG,
			(errmsg("outbox: publishing batch failed: %s", edata->message),
			 edata->detail ? errdetail("%s", edata->detail) : 0));
	outbox_shmem_set_state(OUTBOX_WORKER_BACKING_OFF, edata->message);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (batch != NULL)
	{
		PG_TRY();
		{
			record_failed_batch(cxt, batch);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(cxt);
		}
		PG_END_TRY();
	}

	consecutive_errors = Min(consecutive_errors + 1, 7);
	return Min((long) ERROR_PAUSE_MS << (consecutive_errors - 1), ERROR_PAUSE_MAX_MS);
}

/*
 * Publish until SIGTERM.
 */
static void
publish_loop(void)
{
	MemoryContext loop_cxt;

	loop_cxt = AllocSetContextCreate(TopMemoryContext,
									 "outbox worker loop",
									 ALLOCSET_DEFAULT_SIZES);

	while (!ShutdownRequestPending)
	{
		long		delay = 0;
		ErrorData  *edata = NULL;

		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		PG_TRY();
		{
			CHECK_FOR_INTERRUPTS();
			delay = run_batch(loop_cxt);
			if (run_cleanup(loop_cxt))
				delay = 0;
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(loop_cxt);
			edata = CopyErrorData();
			FlushErrorState();
		}
		PG_END_TRY();

		outbox_kafka_serve();
		if (edata != NULL)
			pause_for(recover_from_error(loop_cxt, edata), false);
		else if (delay > 0)
			pause_for(delay, true);
	}
}

/*
 * The first step: find whether the extension exists in this database and
 * whether its owner may log in, leave the verdict for the launcher and
 * exit.  Connected as the bootstrap superuser, this reads the catalogs and
 * runs nothing else.
 */
static void
look_up_owner(void)
{
	Oid			owner;
	OutboxLookup lookup = OUTBOX_LOOKUP_NO_EXTENSION;
	HeapTuple	roletup;

	StartTransactionCommand();
	owner = outbox_extension_owner();
	if (OidIsValid(owner))
	{
		lookup = OUTBOX_LOOKUP_FOUND;
		roletup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(owner));
		if (HeapTupleIsValid(roletup))
		{
			Form_pg_authid role = (Form_pg_authid) GETSTRUCT(roletup);

			if (!role->rolcanlogin)
			{
				char	   *problem;

				problem = psprintf("role \"%s\", which owns the extension, cannot log in",
								   NameStr(role->rolname));
				outbox_shmem_set_state(OUTBOX_WORKER_WAITING_FOR_EXTENSION, problem);
				lookup = OUTBOX_LOOKUP_CANNOT_LOG_IN;
			}
			ReleaseSysCache(roletup);
		}
	}
	CommitTransactionCommand();
	outbox_shmem_put_lookup(lookup, owner);
	proc_exit(0);
}

/*
 * Main entry point of the worker.  main_arg is the number of its slot in
 * shared memory, bgw_extra says which database and which owner (InvalidOid:
 * look it up).
 */
void
outbox_worker_main(Datum main_arg)
{
	OutboxWorkerArgs args;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	before_shmem_exit(outbox_worker_exit, (Datum) 0);
	outbox_shmem_attach_worker(DatumGetInt32(main_arg), OidIsValid(args.owner));
	BackgroundWorkerInitializeConnectionByOid(args.database, args.owner, 0);
	/* whatever the database or role say, nothing resolves outside these */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("outbox worker");

	if (!OidIsValid(args.owner))
		look_up_owner();

	StartTransactionCommand();
	ereport(LOG,
			(errmsg("outbox worker started for database \"%s\" as role \"%s\"",
					get_database_name(MyDatabaseId), GetUserNameFromId(args.owner, false))));
	CommitTransactionCommand();
	last_events_at = GetCurrentTimestamp();
	publish_loop();
	ereport(LOG,
			(errmsg("outbox worker shutting down")));

	/* exit code 1: the launcher starts the worker again unless the server stops */
	proc_exit(1);
}
