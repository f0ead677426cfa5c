/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The publishing worker of one database: its session, its loop, its
 *		signals, its recovery from errors, its parking, and its slot's
 *		state.
 *
 * Started by the launcher for one database: first for the owner lookup
 * (launcher.c), then as the extension's owner.  Each turn: the checks,
 * then the batches of one transaction (publish.c), a chunk of a snapshot
 * (snapshot.c), and every 10 s the cleanup (retention.c).  docs/design.md,
 * "The worker's loop" and "Batches in one transaction", says why.
 *
 * src/worker/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <malloc.h>
#include <signal.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/catalog.h"
#include "base/guc.h"
#include "capture/snapshot.h"
#include "kafka/kafka.h"
#include "kafka/registry.h"
#include "launcher/launcher_internal.h"
#include "queue/claim.h"
#include "queue/retention.h"
#include "queue/stats.h"
#include "worker/publish.h"
#include "worker/worker.h"

/* pause after a failed batch (doubled while failures repeat, up to the max) */
#define ERROR_PAUSE_MS 1000
#define ERROR_PAUSE_MAX_MS 60000
/* how often the worker looks again while something keeps it waiting */
#define WAITING_MS 1000
/* how often expired events are looked for, and how many go per transaction */
#define CLEANUP_INTERVAL_MS 10000
#define PURGE_BATCH_SIZE 1000
/* how much freed memory the worker keeps for its next turns */
#define KEEP_FREED_BYTES (4 * 1024 * 1024)
/* how long a snapshot whose chunk failed waits */
#define SNAPSHOT_RETRY_MS 1000
/* how often a worker with no snapshot to take looks for one */
#define SNAPSHOT_LOOK_MS 1000

/* what the worker sets for itself, whatever the session defaults say */
static const struct
{
	const char *name;
	const char *value;
}			session_settings[] = {
	{"search_path", "pg_catalog, pg_temp"},
	{"default_transaction_isolation", "read committed"},
	{"default_transaction_read_only", "off"},
	{"default_transaction_deferrable", "off"},
	{"statement_timeout", "0"},
	{"lock_timeout", "0"},
	/*
	 * a DDL statement on the extension's tables (DROP EXTENSION) that locks
	 * them in another order than a batch: the worker, which retries its
	 * batch, sees the deadlock first and gives way, not the statement
	 */
	{"deadlock_timeout", "100ms"},
	{"idle_in_transaction_session_timeout", "0"},
	{"session_replication_role", "origin"},
	{"exit_on_error", "off"},
	{"transform_null_equals", "off"},
	{"standard_conforming_strings", "on"},
	/* the worker's statements are small: compiling them costs latency */
	{"jit", "off"},
	/*
	 * a crash can lose a commit of the worker: docs/design.md, "Batches in
	 * one transaction"
	 */
	{"synchronous_commit", "off"},
};

/* the slot of this worker in the launcher's shared memory */
static OutboxWorkerSlot *my_slot = NULL;

static int	consecutive_errors = 0;
static TimestampTz next_cleanup = 0;
static TimestampTz next_snapshot_look = 0;
/* not before then does the idle worker look whether it may park */
static TimestampTz next_park_look = 0;
/*
 * The database and the version of the extension served, named in the log:
 * every line the worker logs (librdkafka's too) says in its context which
 * database and which cluster it is about.
 */
static char log_database[NAMEDATALEN];
static char served_version[NAMEDATALEN];
static ErrorContextCallback log_context;

/* what kept the worker waiting last, said once in the log */
static char said_waiting[256];
/* the last failure of a snapshot chunk, said once in the log */
static char said_snapshot_failure[256];

/*
 * Record the worker's state and why, if there is a reason to say: error
 * NULL clears the previous one when the state changes, and keeps it
 * otherwise; while the producer keeps settings other than the current
 * ones, that is said instead of nothing.
 */
static void
set_state(OutboxWorkerState state, const char *error)
{
	static bool said_refused = false;
	TimestampTz now = GetCurrentTimestamp();
	const char *refused = outbox_kafka_settings_refused(NULL);
	bool		clear = said_refused && refused == NULL;

	if (error == NULL)
		error = refused;
	said_refused = refused != NULL;

	outbox_slot_lock();
	if (my_slot->state != state)
	{
		my_slot->state = state;
		my_slot->state_since = now;
		clear = true;
	}
	if (clear)
		my_slot->last_error[0] = '\0';
	if (error != NULL)
		strlcpy(my_slot->last_error, error, sizeof(my_slot->last_error));
	outbox_slot_unlock();
	outbox_slot_show_producers(my_slot);
}

/*
 * Give the slot back as the worker exits (before_shmem_exit; arg: whether
 * it publishes), its producers closed.
 */
static void
detach_worker(int code, Datum arg)
{
	bool		publishes = DatumGetBool(arg);

	outbox_kafka_shutdown();
	my_slot->latch = NULL;
	outbox_slot_lock();
	my_slot->pid = 0;
	outbox_slot_unlock();
	/*
	 * An owner lookup leaves its verdict for the launcher to show, a worker
	 * that parked or gave its slot its state (exit code 0); one that failed
	 * meanwhile is stopped, and started again.
	 */
	if (publishes && (code != 0 || (my_slot->state != OUTBOX_WORKER_PARKED &&
									my_slot->state != OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT)))
		set_state(OUTBOX_WORKER_STOPPED, NULL);
}

/*
 * Take slot slotno for the calling worker, and its latch if it publishes
 * (so that commits wake it); undone when it exits.
 */
static void
attach_worker(int slotno, bool publishes)
{
	TimestampTz now = GetCurrentTimestamp();

	my_slot = outbox_slot(slotno);
	pg_atomic_write_u64(&my_slot->published, 0);
	pg_atomic_write_u64(&my_slot->failed, 0);
	outbox_slot_lock();
	my_slot->pid = MyProcPid;
	my_slot->started_at = now;
	my_slot->last_batch_at = 0;
	my_slot->refusal[0] = '\0';
	my_slot->clusters = DSM_HANDLE_INVALID;
	my_slot->restart_requested = false;
	outbox_slot_unlock();
	if (publishes)
		my_slot->latch = MyLatch;
	before_shmem_exit(detach_worker, BoolGetDatum(publishes));
	set_state(OUTBOX_WORKER_STARTING, NULL);
}

/*
 * Has the launcher asked the worker to give its slot to another database
 * (launcher.c)?  If so, to is set to that database, and *waiting to how
 * many databases waited then (either may be NULL).
 */
static bool
asked_to_give(NameData *to, int *waiting)
{
	bool		asked;

	outbox_slot_lock();
	asked = my_slot->give_to.data[0] != '\0';
	if (to != NULL)
		*to = my_slot->give_to;
	if (waiting != NULL)
		*waiting = my_slot->give_waiting;
	outbox_slot_unlock();
	return asked;
}

/* Is the worker asked to give its slot?  For the Kafka layer. */
static bool
slot_asked(void)
{
	return asked_to_give(NULL, NULL);
}

/*
 * SIGTERM: stop.  A wait is cut short at once, but for that of a batch
 * produced to Kafka, which has its own grace (kafka.c).
 */
static void
handle_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	ShutdownRequestPending = true;
	if (!outbox_publish_produced())
	{
		InterruptPending = true;
		ProcDiePending = true;
	}
	SetLatch(MyLatch);
	errno = save_errno;
}

/*
 * The built-in default of a setting, as SET would take it.
 */
static const char *
boot_value(struct config_generic *conf)
{
	switch (conf->vartype)
	{
		case PGC_BOOL:
			return ((struct config_bool *) conf)->boot_val ? "on" : "off";
		case PGC_INT:
			return psprintf("%d", ((struct config_int *) conf)->boot_val);
		case PGC_REAL:
			return psprintf("%.17g", ((struct config_real *) conf)->boot_val);
		case PGC_STRING:
			return ((struct config_string *) conf)->boot_val;
		case PGC_ENUM:
			return config_enum_lookup_by_value((struct config_enum *) conf,
											   ((struct config_enum *) conf)->boot_val);
	}
	return NULL;
}

/*
 * Set what the worker relies on, and put back the built-in default of
 * every other setting that the database or the role set (see the file
 * header).
 */
static void
set_session(void)
{
	struct config_generic **gucs = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
	{
		struct config_generic *conf = gucs[i];

		if ((conf->source == PGC_S_DATABASE || conf->source == PGC_S_USER ||
			 conf->source == PGC_S_DATABASE_USER) &&
			(conf->context == PGC_SUSET || conf->context == PGC_USERSET) &&
			strncmp(conf->name, "outbox.", strlen("outbox.")) != 0)
			(void) set_config_option(conf->name, boot_value(conf), PGC_SUSET,
									 PGC_S_OVERRIDE, GUC_ACTION_SET, true, WARNING, false);
	}
	for (int i = 0; i < lengthof(session_settings); i++)
		SetConfigOption(session_settings[i].name, session_settings[i].value,
						PGC_SUSET, PGC_S_OVERRIDE);
}

/* the unit of work in progress said what it does in pg_stat_activity */
static bool activity_reported = false;

/*
 * Begin one unit of work: a transaction with a snapshot; what it
 * allocates goes in cxt, to outlive the transaction (error recovery needs
 * the batch).  activity NULL: pg_stat_activity keeps saying what it says
 * (the work says what it does itself, if it does anything).
 */
static void
begin_work(const char *activity, MemoryContext cxt)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(cxt);
	activity_reported = activity != NULL;
	if (activity_reported)
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
	if (activity_reported)
		pgstat_report_activity(STATE_IDLE, NULL);
	activity_reported = false;
}

/*
 * Undo the unit of work, and return to cxt.
 */
static void
undo_work(MemoryContext cxt)
{
	PopActiveSnapshot();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	if (activity_reported)
		pgstat_report_activity(STATE_IDLE, NULL);
	activity_reported = false;
}

/*
 * Wait for ms milliseconds, or less if the latch is set and wakeable.  A
 * reload is served on the way; a wait that is not wakeable goes on until
 * its time is up, SIGTERM, or the launcher asks for the worker's slot.
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
		if ((rc & WL_LATCH_SET) && asked_to_give(NULL, NULL))
			break;
		if (wakeable && (rc & WL_LATCH_SET))
		{
			/* the commits of the next while share the batch, if they come fast */
			if (outbox_publish_gathers())
				(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 outbox_wake_delay, PG_WAIT_EXTENSION);
			break;
		}
	}
}

/* what the worker does next */
typedef enum NextStep
{
	STEP_PUBLISH,
	STEP_WAIT,					/* something keeps it from publishing */
	STEP_EXIT					/* the extension is gone or changed hands */
} NextStep;

/*
 * Wait, saying why in the state, pg_stat_activity and, once, the log.
 */
static NextStep
wait_because(OutboxWorkerState state, const char *why)
{
	set_state(state, why);
	pgstat_report_activity(STATE_RUNNING, why);
	if (strncmp(said_waiting, why, sizeof(said_waiting) - 1) != 0)
		ereport(LOG,
				(errmsg("outbox worker waits: %s", why)));
	strlcpy(said_waiting, why, sizeof(said_waiting));
	return STEP_WAIT;
}

/*
 * May the worker publish now?  Looks up the extension into *ext; the
 * caller holds a transaction.
 */
static NextStep
next_step(OutboxExtension *ext)
{
	char	   *problem;
	pid_t		restoring;

	if (!outbox_extension_find(ext) || ext->owner != GetUserId())
		return STEP_EXIT;
	if ((problem = outbox_extension_problem(ext)) != NULL)
		return wait_because(OUTBOX_WORKER_WAITING_FOR_EXTENSION, problem);
	if (!outbox_enabled)
	{
		outbox_publish_note_undelivered(ext);
		return wait_because(OUTBOX_WORKER_DISABLED,
							"outbox.enabled is off for this database");
	}
	if ((restoring = outbox_restoring_backend(MyDatabaseId)) != 0)
		return wait_because(OUTBOX_WORKER_WAITING_FOR_RESTORE,
							psprintf("process %d writes the event log by hand (a restore): publishing resumes when it ends",
									 (int) restoring));
	said_waiting[0] = '\0';
	strlcpy(served_version, ext->version_name, sizeof(served_version));
	return STEP_PUBLISH;
}

/*
 * Say why the worker starts again, as asked: an update of the extension,
 * or a change of its settings or owner.
 */
static void
log_restart(void)
{
	OutboxExtension ext;
	bool		updated;

	StartTransactionCommand();
	updated = outbox_extension_find(&ext) && served_version[0] != '\0' &&
		strcmp(ext.version_name, served_version) != 0;
	CommitTransactionCommand();
	if (updated)
		ereport(LOG,
				(errmsg("extension outbox was updated from version %s to %s, worker restarting to serve it",
						served_version, ext.version_name)));
	else
		ereport(LOG,
				(errmsg("the settings or the extension changed, worker restarting")));
}

/*
 * Delete one batch of expired events, and rotate the log, each in a
 * transaction of its own, if it is time to, removing the schema ids kept
 * twice with the rotation.  Returns true if there may be more to delete
 * right away.  None takes a lock that enqueue or publishing waits for.
 */
static bool
run_cleanup(MemoryContext cxt, const OutboxExtension *ext)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		removed = 0;
	int			current_log;

	if (now < next_cleanup)
		return false;

	begin_work("removing expired events", cxt);
	removed = outbox_purge_expired(ext, PURGE_BATCH_SIZE);
	end_work(cxt);
	if (removed >= PURGE_BATCH_SIZE)
		return true;

	begin_work("rotating the log", cxt);
	/* no count of what it removes: that would read the tables it empties */
	current_log = outbox_rotate_log(ext, outbox_published_retention, false, NULL);
	outbox_registry_tidy(ext);
	end_work(cxt);
	if (current_log >= 0)
		pg_atomic_write_u32(&my_slot->current_log, current_log);
	next_cleanup = TimestampTzPlusMilliseconds(now, CLEANUP_INTERVAL_MS);
	return false;
}

/*
 * Take the next chunk of a snapshot, if one is due, in a transaction of
 * its own, after one that notes its start (snapshot.c); after a look that
 * found none, the next is SNAPSHOT_LOOK_MS later.  Returns true if there is more to take right away.  A chunk
 * that fails is recorded, in a new transaction, on its snapshot, which is
 * tried again after SNAPSHOT_RETRY_MS; a failure is logged once, and a
 * row lock that a chunk waited for too long is no failure worth a log
 * line.  Recovery runs after PG_END_TRY, as the loop's does.
 */
static bool
run_snapshot(MemoryContext cxt, const OutboxExtension *ext)
{
	TimestampTz now = GetCurrentTimestamp();
	OutboxSnapshotChunk chunk;
	ErrorData  *edata = NULL;
	bool		more = false;

	/* a transaction per turn only while there is a snapshot to take */
	if (now < next_snapshot_look)
		return false;
	memset(&chunk, 0, sizeof(chunk));
	/* most turns find none due: say nothing of those */
	begin_work(NULL, cxt);
	PG_TRY();
	{
		if (outbox_snapshot_start(ext, &chunk))
		{
			end_work(cxt);
			begin_work(NULL, cxt);
			more = outbox_snapshot_chunk(ext, &chunk);
		}
		else
			more = OidIsValid(chunk.relid);
		activity_reported = OidIsValid(chunk.relid);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	if (edata == NULL)
	{
		end_work(cxt);
		if (OidIsValid(chunk.relid))
			said_snapshot_failure[0] = '\0';
		else
			next_snapshot_look = TimestampTzPlusMilliseconds(now, SNAPSHOT_LOOK_MS);
		return more;
	}

	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	activity_reported = false;
	if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
		strncmp(said_snapshot_failure, edata->message, sizeof(said_snapshot_failure) - 1) != 0)
		ereport(LOG,
				(errmsg("snapshot chunk failed: %s", edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("It is tried again every second; outbox_snapshots shows the last error.")));
	strlcpy(said_snapshot_failure, edata->message, sizeof(said_snapshot_failure));
	if (OidIsValid(chunk.relid))
	{
		begin_work("recording a snapshot failure", cxt);
		outbox_snapshot_failed(ext, chunk.relid, edata->sqlerrcode, edata->message,
							   SNAPSHOT_RETRY_MS);
		end_work(cxt);
	}
	return false;
}

/*
 * Record, in a new transaction, what delivery reports said of the batches
 * of a transaction that failed.  Events without a report are left as they
 * were, due again untouched: only a delivery report counts an attempt.
 */
static void
record_failed_batches(MemoryContext cxt, List *batches)
{
	OutboxExtension ext;
	ListCell   *lc;

	begin_work("recording delivery outcomes", cxt);
	if (outbox_extension_find(&ext) && outbox_extension_problem(&ext) == NULL &&
		ext.owner == GetUserId())
	{
		foreach(lc, batches)
		{
			OutboxBatch *batch = lfirst(lc);
			bool		reported = false;

			for (int i = 0; i < batch->count && !reported; i++)
				reported = batch->events[i].outcome == OUTBOX_DELIVERED ||
					batch->events[i].outcome == OUTBOX_REFUSED;
			if (reported)
				outbox_publish_record(&ext, batch);
		}
		outbox_stats_write_due(&ext, true);
	}
	end_work(cxt);
	outbox_stats_committed();
	foreach(lc, batches)
		outbox_publish_count(lfirst(lc));
}

/*
 * Clean up after an error in the loop: abort the transaction, forget the
 * batches in flight, say why, and record what is known of them.  Called
 * outside any PG_TRY; an error while recording is caught here and leaves
 * the batches' rows due.  Returns how long to pause: longer while errors
 * repeat, so that a persistent one neither spins nor floods the log.
 */
static long
recover_from_error(MemoryContext cxt, ErrorData *edata)
{
	List	   *batches = outbox_publish_forget(NULL);

	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	outbox_kafka_forget_batch();
	outbox_stats_begin(cxt);

	ereport(LOG,
			(errmsg("publishing batch failed: %s", edata->message),
			 edata->detail ? errdetail("%s", edata->detail) : 0));
	set_state(OUTBOX_WORKER_BACKING_OFF, edata->message);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (batches != NIL)
	{
		PG_TRY();
		{
			record_failed_batches(cxt, batches);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(cxt);
			outbox_stats_begin(cxt);
		}
		PG_END_TRY();
	}

	consecutive_errors = Min(consecutive_errors + 1, 7);
	return Min((long) ERROR_PAUSE_MS << (consecutive_errors - 1), ERROR_PAUSE_MAX_MS);
}

/*
 * One turn of the loop: what keeps the worker waiting, else batches, a
 * chunk of a snapshot and, when due, the cleanup.  Returns how long to
 * wait before the next turn (negative: not wakeable), and *exit if the
 * worker should stop.
 */
static long
run_turn(MemoryContext cxt, bool *exit)
{
	OutboxExtension ext;
	NextStep	step;
	long		delay;
	bool		undo;
	List	   *batches;
	OutboxBatch *late;
	ListCell   *lc;

	begin_work("claiming due events", cxt);
	outbox_stats_begin(cxt);
	step = next_step(&ext);
	if (step != STEP_PUBLISH)
	{
		end_work(cxt);
		*exit = step == STEP_EXIT;
		return WAITING_MS;
	}
	delay = outbox_publish_run(&ext, &undo);
	if (undo)
		undo_work(cxt);
	else
	{
		outbox_stats_write_due(&ext, false);
		end_work(cxt);
		outbox_stats_committed();
	}
	batches = outbox_publish_forget(&late);
	foreach(lc, batches)
		outbox_publish_count(lfirst(lc));
	if (late != NULL)
		outbox_publish_count(late);
	consecutive_errors = 0;
	if (run_snapshot(cxt, &ext))
		delay = 0;
	if (run_cleanup(cxt, &ext))
		delay = 0;
	return delay;
}

/*
 * Say that the worker parked (why), clear its latch, and look a last time,
 * in a transaction, for anything left to do, now or later, that no commit
 * would wake a worker for: an event undelivered (due or backing off), an
 * unfinished snapshot.  The latch is cleared before that look, so that a
 * commit it does not see wakes the launcher instead (launcher.c).  Returns
 * true if nothing is left.
 */
static bool
nothing_left(MemoryContext cxt, const char *why)
{
	OutboxExtension ext;
	bool		nothing;

	set_state(OUTBOX_WORKER_PARKED, why);
	my_slot->latch = NULL;
	pg_memory_barrier();
	begin_work("looking for work before giving the slot back", cxt);
	nothing = next_step(&ext) == STEP_PUBLISH &&
		!outbox_events_undelivered(&ext) && !outbox_snapshot_unfinished(&ext);
	end_work(cxt);
	return nothing;
}

/*
 * Give the worker's slot to database to, as the launcher asks once the
 * worker has had its time slice while to waits (launcher.c, waiting of
 * them then): between two turns, so that nothing is in flight and every
 * chunk of a snapshot is committed.  Parked if nothing is left to do (see
 * nothing_left); else the database waits for its turn, which the launcher
 * gives it with no commit needed.  The caller exits.
 */
static void
give_slot(MemoryContext cxt, const char *to, int waiting)
{
	int			slice = outbox_time_slice();
	bool		parked;

	parked = nothing_left(cxt, psprintf("gave its slot to database \"%s\" after its time slice of %d ms, with nothing left to do: a commit here starts a worker again",
										to, slice));
	if (!parked)
		set_state(OUTBOX_WORKER_WAITING_FOR_WORKER_SLOT,
				  psprintf(OUTBOX_GAVE_SLOT, to, slice, waiting));
	ereport(DEBUG1,
			(errmsg("outbox worker gives its slot to database \"%s\" after its time slice of %d ms",
					to, slice),
			 parked ?
			 errdetail("Nothing is left to do here: the next commit that enqueues an event starts a worker again.") :
			 errdetail_plural("%d database waits for a worker; this one is served again in its turn.",
							  "%d databases wait for a worker; this one is served again in its turn.",
							  waiting, waiting)));
}

/*
 * Park: give the worker's slot back if it has been idle for
 * outbox.worker_idle_timeout while another database waits for one, and
 * nothing is left to do (see nothing_left).  Returns true if the worker
 * is to exit.
 */
static bool
park(MemoryContext cxt)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz last_events_at = outbox_publish_idle_since();

	if (outbox_worker_idle_timeout < 0 || last_events_at == 0 || now < next_park_look ||
		!TimestampDifferenceExceeds(last_events_at, now, outbox_worker_idle_timeout) ||
		!outbox_take_waiting_database())
		return false;

	if (nothing_left(cxt, "gave the worker back, idle while another database waited: a commit here starts one again"))
	{
		ereport(LOG,
				(errmsg("outbox worker gives its slot to a database that waits for one, after %ld ms idle",
						(long) ((now - last_events_at) / 1000)),
				 errdetail("The next commit that enqueues an event here starts a worker again.")));
		return true;
	}
	my_slot->latch = MyLatch;
	set_state(OUTBOX_WORKER_IDLE, NULL);
	/* what was found is taken at once; the next look is a while later */
	SetLatch(MyLatch);
	next_park_look = TimestampTzPlusMilliseconds(now, outbox_worker_idle_timeout);
	return false;
}

/*
 * Publish until SIGTERM, until the extension goes, until a backend asks
 * the worker to start again (utility.c): the launcher then looks for the
 * owner again and starts a worker with the settings as they are then; or
 * until the worker parks or gives its slot.  Returns true if it parked or
 * gave its slot.
 */
static bool
publish_loop(void)
{
	MemoryContext loop_cxt = AllocSetContextCreate(TopMemoryContext,
												   "outbox worker loop",
												   ALLOCSET_DEFAULT_SIZES);

	/* a batch that waits on a cluster that hangs gives way to the turn */
	outbox_kafka_yield_requested = slot_asked;
	for (;;)
	{
		long		delay = 0;
		bool		exit = false;
		bool		restart;
		NameData	give_to;
		int			waiting;
		ErrorData  *edata = NULL;

		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		outbox_slot_lock();
		restart = my_slot->restart_requested;
		outbox_slot_unlock();
		if (ShutdownRequestPending)
			break;
		if (restart)
		{
			log_restart();
			break;
		}
		if (asked_to_give(&give_to, &waiting))
		{
			give_slot(loop_cxt, NameStr(give_to), waiting);
			return true;
		}

		PG_TRY();
		{
			CHECK_FOR_INTERRUPTS();
			delay = run_turn(loop_cxt, &exit);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(loop_cxt);
			edata = CopyErrorData();
			FlushErrorState();
		}
		PG_END_TRY();

		if (exit)
		{
			ereport(LOG,
					(errmsg("the extension was dropped or changed owner, worker exiting")));
			break;
		}
		if (edata == NULL && park(loop_cxt))
			return true;
		outbox_kafka_serve();
		if (edata != NULL)
			pause_for(recover_from_error(loop_cxt, edata), false);
		else if (delay != 0)
			pause_for(Abs(delay), delay > 0);
	}
	return false;
}

/*
 * What a turn allocates (a batch's events, the executor's memory) is freed
 * when it ends and allocated again by the next one: keep it in the heap
 * rather than give it back to the kernel at every batch and take page
 * faults to have it again (malloc's default trims the heap past 128 kB
 * free, and maps larger allocations apart).
 */
static void
keep_freed_memory(void)
{
#if defined(M_TRIM_THRESHOLD) && defined(M_MMAP_THRESHOLD)
	mallopt(M_MMAP_THRESHOLD, KEEP_FREED_BYTES);
	mallopt(M_TRIM_THRESHOLD, KEEP_FREED_BYTES);
#endif
}

/*
 * The context of every line the worker logs: its database, and its
 * cluster while it has one only (with several, a line about one of them
 * names it in a context of its own).
 */
static void
worker_log_context(void *arg)
{
	if (outbox_brokers != NULL && *outbox_brokers != '\0' &&
		list_length(outbox_kafka_producers()) <= 1)
		errcontext("outbox worker of database \"%s\", Kafka cluster %s",
				   log_database, outbox_brokers);
	else
		errcontext("outbox worker of database \"%s\"", log_database);
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
	pqsignal(SIGTERM, handle_sigterm);
	BackgroundWorkerUnblockSignals();

	attach_worker(DatumGetInt32(main_arg), OidIsValid(args.owner));
	BackgroundWorkerInitializeConnectionByOid(args.database, args.owner, 0);
	set_session();
	pgstat_report_appname("outbox worker");
	StartTransactionCommand();
	strlcpy(log_database, get_database_name(MyDatabaseId), sizeof(log_database));
	CommitTransactionCommand();
	log_context.callback = worker_log_context;
	log_context.previous = NULL;
	error_context_stack = &log_context;

	if (!OidIsValid(args.owner))
	{
		outbox_look_up_owner(my_slot);
		proc_exit(0);
	}

	outbox_slot_lock();
	my_slot->role = args.owner;
	outbox_slot_unlock();
	keep_freed_memory();
	StartTransactionCommand();
	ereport(LOG,
			(errmsg("outbox worker started for database \"%s\" as role \"%s\"",
					log_database, GetUserNameFromId(args.owner, false))));
	CommitTransactionCommand();
	outbox_publish_init(my_slot, set_state);
	/* parked: the launcher starts the worker again when there is work */
	if (!publish_loop())
		ereport(LOG,
				(errmsg("outbox worker shutting down")));

	/*
	 * The launcher starts the worker again unless the server stops; exit
	 * code 0, so that the postmaster does not log the exit as a failure
	 */
	proc_exit(0);
}
