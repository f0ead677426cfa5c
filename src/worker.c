/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The outbox worker: registration, main loop, signals, error recovery.
 *
 * One worker per server publishes the events of outbox.database.  Each
 * batch is one transaction: claim (row locks), make sure the claiming
 * snapshot's commits are flushed to WAL, produce, wait for every delivery
 * report, record the outcomes, commit.  An error anywhere in a batch
 * aborts it, its rows stay due, and the worker carries on after a pause.
 *
 * Between batches, every 10 s, it deletes events past their retention, a
 * thousand per transaction.
 *
 * SIGTERM is a request, not an interrupt: the worker stops claiming, gives
 * the batch in flight a bounded time (kafka.c), records it and exits.
 *
 * src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "outbox.h"

/* pause after a failed batch (doubled while failures repeat, up to the max) */
#define ERROR_PAUSE_MS 1000
#define ERROR_PAUSE_MAX_MS 60000
/* pause between checks while the extension is missing */
#define EXTENSION_CHECK_MS 5000
/* how often expired events are looked for, and how many go per transaction */
#define CLEANUP_INTERVAL_MS 10000
#define PURGE_BATCH_SIZE 1000

/* the batch of the current transaction, for error recovery */
static OutboxBatch *batch_in_progress = NULL;
static int	consecutive_errors = 0;
static TimestampTz next_cleanup = 0;

/*
 * Register the worker.  Called from _PG_init in the postmaster.
 */
void
outbox_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "outbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "outbox_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "outbox worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "outbox worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

static void
outbox_worker_exit(int code, Datum arg)
{
	outbox_kafka_shutdown();
}

/*
 * Report what the worker does, in shared memory and pg_stat_activity.
 */
static void
report_state(OutboxWorkerState state, const char *activity)
{
	outbox_shmem_set_state(state, NULL);
	pgstat_report_activity(STATE_RUNNING, activity);
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
 * Record, in a new transaction, what is known of a batch whose transaction
 * failed: deliveries as published, events without an outcome as a failed
 * attempt with the error's text.  An error here is not caught: the worker
 * exits and its restart finds the rows still due.
 */
static void
record_failed_batch(OutboxBatch *batch, const char *error)
{
	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (ev->outcome == OUTBOX_IN_FLIGHT)
		{
			ev->outcome = OUTBOX_REFUSED;
			ev->error = error;
			ev->permanent = false;
		}
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (outbox_extension_ready())
		outbox_record_outcomes(batch);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * Abort the failed batch's transaction, say why and record its outcomes
 * anew.  Returns how long to pause: longer while failures repeat, so that
 * a persistent error neither spins nor floods the log.
 */
static long
recover_from_error(MemoryContext cxt)
{
	ErrorData  *edata;
	OutboxBatch *batch = batch_in_progress;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	outbox_kafka_release();
	batch_in_progress = NULL;

	ereport(LOG,
			(errmsg("outbox: publishing batch failed: %s", edata->message),
			 edata->detail ? errdetail("%s", edata->detail) : 0));
	outbox_shmem_set_state(OUTBOX_WORKER_BACKING_OFF, edata->message);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (batch != NULL)
	{
		record_failed_batch(batch, edata->message);
		count_outcomes(batch);
	}
	MemoryContextSwitchTo(cxt);

	consecutive_errors = Min(consecutive_errors + 1, 7);
	return Min((long) ERROR_PAUSE_MS << (consecutive_errors - 1), ERROR_PAUSE_MAX_MS);
}

/*
 * Run one batch in one transaction.  Returns how long to wait before the
 * next: 0 after a full batch, poll_interval after a partial one, longer
 * while there is nothing to do yet.
 */
static long
run_batch(MemoryContext cxt)
{
	OutboxBatch *batch;
	long		delay = outbox_poll_interval;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* the batch must outlive the transaction, for error recovery */
	MemoryContextSwitchTo(cxt);

	if (!outbox_extension_ready())
	{
		report_state(OUTBOX_WORKER_WAITING_FOR_EXTENSION,
					 "waiting for CREATE EXTENSION outbox");
		PopActiveSnapshot();
		CommitTransactionCommand();
		return EXTENSION_CHECK_MS;
	}

	outbox_kafka_configure();
	if (!outbox_kafka_reachable())
	{
		report_state(OUTBOX_WORKER_BROKER_UNREACHABLE,
					 psprintf("no Kafka broker reachable at %s", outbox_brokers));
		PopActiveSnapshot();
		CommitTransactionCommand();
		if (!outbox_kafka_probe())
			return ERROR_PAUSE_MS;
		ereport(LOG,
				(errmsg("outbox: Kafka brokers reachable again, resuming")));
		return 0;
	}

	pgstat_report_activity(STATE_RUNNING, "claiming due events");
	batch = outbox_claim_batch(outbox_batch_size);
	batch_in_progress = batch;
	if (batch->count > 0)
	{
		report_state(OUTBOX_WORKER_PUBLISHING,
					 psprintf("publishing %d events", batch->count));

		/*
		 * An event committed with synchronous_commit = off may be visible
		 * before its commit record is on disk; a crash would then take it
		 * back.  Flushing up to the current insert position covers every
		 * commit this snapshot sees.
		 */
		XLogFlush(GetXLogInsertRecPtr());

		outbox_kafka_publish(batch);
		pgstat_report_activity(STATE_RUNNING, "recording delivery outcomes");
		outbox_record_outcomes(batch);
		if (batch->count >= outbox_batch_size)
			delay = 0;
	}

	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	batch_in_progress = NULL;
	consecutive_errors = 0;
	if (batch->count > 0)
		count_outcomes(batch);

	outbox_shmem_set_state(OUTBOX_WORKER_IDLE, NULL);
	pgstat_report_activity(STATE_IDLE, NULL);
	return delay;
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
	int64		removed = 0;

	if (now < next_cleanup)
		return false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (outbox_extension_ready())
	{
		pgstat_report_activity(STATE_RUNNING, "removing expired events");
		removed = outbox_purge_expired(PURGE_BATCH_SIZE);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (removed >= PURGE_BATCH_SIZE)
		return true;
	next_cleanup = TimestampTzPlusMilliseconds(now, CLEANUP_INTERVAL_MS);
	return false;
}

/*
 * Main entry point of the worker.
 */
void
outbox_worker_main(Datum main_arg)
{
	MemoryContext loop_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	before_shmem_exit(outbox_worker_exit, (Datum) 0);
	BackgroundWorkerInitializeConnection(outbox_database, NULL, 0);
	outbox_shmem_attach_worker();
	outbox_shmem_set_state(OUTBOX_WORKER_STARTING, NULL);
	pgstat_report_appname("outbox worker");
	ereport(LOG,
			(errmsg("outbox worker started for database \"%s\"", outbox_database)));

	loop_cxt = AllocSetContextCreate(TopMemoryContext,
									 "outbox worker loop",
									 ALLOCSET_DEFAULT_SIZES);

	while (!ShutdownRequestPending)
	{
		long		delay;

		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		PG_TRY();
		{
			delay = run_batch(loop_cxt);
			if (run_cleanup(loop_cxt))
				delay = 0;
		}
		PG_CATCH();
		{
			delay = recover_from_error(loop_cxt);
		}
		PG_END_TRY();

		outbox_kafka_serve();
		if (delay > 0 && !ShutdownRequestPending)
		{
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 delay,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
	}

	ereport(LOG,
			(errmsg("outbox worker shutting down")));

	/* exit code 1: restarted after bgw_restart_time unless the server stops */
	proc_exit(1);
}
