/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The publishing worker of one database: its session, its loop, its
 *		signals, its recovery from errors, and its slot's state.
 *
 * Started by the launcher for one database: first for the owner lookup
 * (launcher.c), then as the extension's owner.  Each turn: the checks,
 * then the batches of one transaction (claim.c, standby.c, kafka.c,
 * record.c), a chunk of a snapshot (snapshot.c), and every 10 s the
 * cleanup (retention.c).  docs/design.md, "The worker's loop" and
 * "Batches in one transaction", says why.
 *
 * src/worker/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <malloc.h>
#include <signal.h>

#include "access/clog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "base/catalog.h"
#include "base/guc.h"
#include "capture/snapshot.h"
#include "format/format.h"
#include "format/topics.h"
#include "kafka/kafka.h"
#include "kafka/registry.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"
#include "queue/claim.h"
#include "queue/record.h"
#include "queue/retention.h"
#include "queue/stats.h"
#include "worker/standby.h"
#include "worker/worker.h"

/* pause after a failed batch (doubled while failures repeat, up to the max) */
#define ERROR_PAUSE_MS 1000
#define ERROR_PAUSE_MAX_MS 60000
/* how often the worker looks again while something keeps it waiting */
#define WAITING_MS 1000
/*
 * The producers are closed once the worker has had no events to publish
 * for twice outbox.delivery_timeout, and at least this long: librdkafka's
 * threads cost about a millisecond of CPU per second even when idle, which
 * adds up over many databases.  By then every report of what they were
 * sent has come, late ones of events handed off included.
 */
#define PRODUCER_IDLE_MIN_MS 10000
/* how often expired events are looked for, and how many go per transaction */
#define CLEANUP_INTERVAL_MS 10000
#define PURGE_BATCH_SIZE 1000
/*
 * With outbox.standby_slots set, how long a batch waits for the standbys
 * inside its transaction, and how long the worker then pauses, out of it,
 * before it claims again: a lagging standby costs neither a long
 * transaction nor a claim per commit.
 */
#define STANDBY_WAIT_MS 100
#define STANDBY_PAUSE_MS 200
/*
 * The longest a transaction goes on publishing batches, and the most bytes
 * of events it holds (for error recovery) before it commits.
 */
#define RUN_MAX_MS 100
#define RUN_MAX_BYTES (2 * OUTBOX_BATCH_MAX_BYTES)
/* how often the statistics summed in memory are written */
#define STATS_INTERVAL_MS 1000
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

/*
 * Topics whose cluster was down when their events were claimed, in
 * held_cxt: the claim leaves their events in the retry table until it
 * answers again, or the topic moves to another cluster.
 */
static MemoryContext held_cxt = NULL;
static List *held_topics = NIL;

/* the batches of the current transaction, for error recovery */
static List *run_batches = NIL;
/* the late reports the current transaction records (record_late_reports) */
static OutboxBatch *run_late = NULL;
/* a batch is produced: SIGTERM lets the transaction finish */
static volatile sig_atomic_t batch_produced = false;
/*
 * Statistics of committed batches not written yet, in stats_cxt; those of
 * the current transaction; when they were last written, and whether the
 * current transaction writes them.
 */
static MemoryContext stats_cxt = NULL;
static HTAB *unwritten_stats = NULL;
static HTAB *run_stats = NULL;
static TimestampTz stats_written_at = 0;
static bool stats_writing = false;
static int	consecutive_errors = 0;
static TimestampTz next_cleanup = 0;
static TimestampTz next_snapshot_look = 0;
/* did the last batch find nothing, and when did one last find something */
static bool idle = false;
static TimestampTz last_events_at = 0;
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
 * Show the producers in the slot: each cluster, the unreachable ones first
 * (see outbox_slot_show_clusters), and the broker connections up, each
 * cluster (its brokers) counted once however many producers it has (-1 if
 * none is open).  The caller holds no lock.
 */
static void
set_clusters(void)
{
	List	   *producers = outbox_kafka_producers();
	OutboxProducerStatus *clusters = palloc(sizeof(OutboxProducerStatus) *
											(list_length(producers) + 1));
	int			n = 0;
	int			brokers_up = -1;
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducerStatus status;

		outbox_kafka_status(lfirst(lc), &status);
		if (status.open && !status.reachable)
		{
			memmove(&clusters[1], &clusters[0], sizeof(OutboxProducerStatus) * n);
			clusters[0] = status;
		}
		else
			clusters[n] = status;
		n++;
	}
	/* of the producers of the same brokers, the one with most up counts */
	for (int i = 0; i < n; i++)
	{
		bool		skip = clusters[i].brokers_up < 0;

		for (int j = 0; j < n && !skip; j++)
			skip = j != i && strcmp(clusters[j].brokers, clusters[i].brokers) == 0 &&
				(clusters[j].brokers_up > clusters[i].brokers_up ||
				 (clusters[j].brokers_up == clusters[i].brokers_up && j < i));
		if (!skip)
			brokers_up = Max(brokers_up, 0) + clusters[i].brokers_up;
	}
	outbox_slot_show_clusters(my_slot, clusters, n);
	pfree(clusters);
	outbox_slot_lock();
	my_slot->brokers_up = brokers_up;
	outbox_slot_unlock();
}

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
	set_clusters();
}

/*
 * Report what the worker does, in shared memory and pg_stat_activity.
 */
static void
report_state(OutboxWorkerState state, const char *error, const char *activity)
{
	set_state(state, error);
	pgstat_report_activity(STATE_RUNNING, activity);
}

/*
 * Count a recorded batch's outcomes in shared memory, and keep Kafka's last
 * refusal there until an event of its topic is delivered: a failing topic
 * shows in outbox_worker_status() while the worker is idle.
 */
static void
count_outcomes(OutboxBatch *batch)
{
	static char refused_topic[OUTBOX_TOPIC_SIZE];
	char		refusal[sizeof(my_slot->refusal)] = "";
	bool		mended = false;
	int			published = 0;
	int			failed = 0;
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (ev->outcome == OUTBOX_DELIVERED)
		{
			published++;
			mended |= strcmp(ev->topic, refused_topic) == 0;
		}
		else if (ev->outcome == OUTBOX_REFUSED)
		{
			failed++;
			strlcpy(refused_topic, ev->topic, sizeof(refused_topic));
			snprintf(refusal, sizeof(refusal), "topic \"%s\": %s", ev->topic, ev->error);
			mended = false;
		}
	}
	pg_atomic_fetch_add_u64(&my_slot->published, published);
	pg_atomic_fetch_add_u64(&my_slot->failed, failed);
	outbox_slot_lock();
	my_slot->last_batch_at = now;
	if (refusal[0] != '\0')
		strlcpy(my_slot->refusal, refusal, sizeof(my_slot->refusal));
	else if (mended)
		my_slot->refusal[0] = '\0';
	outbox_slot_unlock();
	if (mended && refusal[0] == '\0')
		refused_topic[0] = '\0';
}

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

/*
 * SIGTERM: stop.  A wait is cut short at once, but for that of a batch
 * produced to Kafka, which has its own grace (kafka.c).
 */
static void
handle_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	ShutdownRequestPending = true;
	if (!batch_produced)
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
			/* the commits of the next while share the batch */
			if (outbox_wake_delay > 0)
				(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 outbox_wake_delay, PG_WAIT_EXTENSION);
			break;
		}
	}
}

/*
 * Flush WAL up to the end of the last record inserted so far: that covers
 * every commit the batch's snapshot sees; returns the position.  The insert
 * position points past the page header when a page has no record yet; no
 * record ends there, and XLogFlush cannot reach it, so step back to the
 * page's start.
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
 * Make sure the commits of a batch's events are on disk before they are
 * published: a transaction committed with synchronous_commit = off is seen
 * before its commit is flushed, and a crash could take it back after its
 * events were published.  Returns a position past those commits, for
 * outbox_standbys_have().
 *
 * The commit log keeps where such a commit ended (the position that hint
 * bits wait for), so only that much is flushed for events of the log,
 * where flushing to the end of WAL would wait for the records of
 * transactions still running.  The standbys need every commit's position,
 * which only the end of WAL bounds; so does an event of the retry table,
 * which the worker's own transaction (with synchronous_commit = off) may
 * have written.
 */
static XLogRecPtr
flush_commits_of(const OutboxBatch *batch)
{
	XLogRecPtr	flush = InvalidXLogRecPtr;

	if (outbox_standby_slots[0] != '\0')
		return flush_visible_commits();
	for (int i = 0; i < batch->count; i++)
	{
		const OutboxEvent *ev = &batch->events[i];
		TransactionId xid;
		XLogRecPtr	lsn;

		if (!ev->from_log)
			return flush_visible_commits();
		xid = XidFromFullTransactionId(DatumGetFullTransactionId(ev->values[LOG_TXID]));
		/* older than the commit log: committed and flushed long ago */
		if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
			continue;
		(void) TransactionIdGetStatus(xid, &lsn);
		flush = Max(flush, lsn);
	}
	if (!XLogRecPtrIsInvalid(flush))
		XLogFlush(flush);
	return flush;
}

/*
 * The producer of the cluster that topic's events go to (topic NULL: the
 * default cluster's), by settings.
 */
static OutboxProducer *
producer_of_topic(const OutboxTopicSettings *settings, const char *topic)
{
	const OutboxTopicSetting *setting = NULL;

	if (topic != NULL)
		setting = outbox_topic_setting(settings, topic);
	if (setting == NULL)
		return outbox_kafka_producer(NULL, NULL);
	return outbox_kafka_producer(setting->brokers, setting->properties_file);
}

/*
 * Record, in this transaction, what the late reports of events handed off
 * said (outbox_kafka_late_reports), before anything is claimed: a
 * delivered one published, a refused or timed-out one charged an attempt.
 * If the transaction fails they are lost, and the events are due again
 * when their hand-off said.  Nothing may be in flight.
 */
static void
record_late_reports(const OutboxExtension *ext)
{
	OutboxBatch *late = outbox_kafka_late_reports();
	OutboxRetryPolicy policy;

	if (late->count == 0)
		return;
	policy = outbox_retry_policy();
	pgstat_report_activity(STATE_RUNNING, "recording late delivery reports");
	outbox_record_late(ext, late, outbox_published_retention != 0, &policy,
					   run_stats);
	run_late = late;
}

/*
 * Make sure a producer built from the current settings exists for each
 * cluster that settings name, and the outbox.* settings' one; close and
 * forget those no longer named; probe those whose brokers were all seen
 * down, without waiting; record the late reports; keep holding the topics
 * whose cluster is still down, or still has events handed off.  Returns
 * false, having said so, while no cluster answers.  Nothing may be in
 * flight.
 */
static bool
ensure_producers(const OutboxExtension *ext, const OutboxTopicSettings *settings)
{
	List	   *named = list_make1(producer_of_topic(settings, NULL));
	List	   *held = NIL;
	bool		any = false;
	ListCell   *lc;
	MemoryContext old;
	char	   *reason;

	for (int i = 0; i < settings->count; i++)
		named = list_append_unique_ptr(named,
									   outbox_kafka_producer(settings->rows[i].brokers,
															 settings->rows[i].properties_file));
	foreach(lc, list_copy(outbox_kafka_producers()))
	{
		if (!list_member_ptr(named, lfirst(lc)))
			outbox_kafka_drop(lfirst(lc));
	}
	foreach(lc, named)
	{
		OutboxProducer *producer = lfirst(lc);

		outbox_kafka_configure(producer);
		if (outbox_kafka_reachable(producer) || outbox_kafka_probe(producer))
			any = true;
	}
	record_late_reports(ext);

	if (held_cxt == NULL)
		held_cxt = AllocSetContextCreate(TopMemoryContext, "outbox held topics",
										 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(held_cxt);
	foreach(lc, held_topics)
	{
		OutboxProducer *producer = producer_of_topic(settings, lfirst(lc));

		if (outbox_kafka_reachable(producer) && !outbox_kafka_busy(producer))
			pfree(lfirst(lc));
		else
			held = lappend(held, lfirst(lc));
	}
	list_free(held_topics);
	held_topics = held;
	MemoryContextSwitchTo(old);

	if (any)
		return true;
	/* the outbox.* settings' cluster: down, or its properties file refused */
	if (outbox_kafka_settings_refused(linitial(named)) != NULL)
		reason = pstrdup(outbox_kafka_settings_refused(linitial(named)));
	else if (list_length(named) == 1)
		reason = psprintf("no Kafka broker reachable at %s", outbox_brokers);
	else
		reason = psprintf("no Kafka broker reachable in any of the %d clusters",
						  list_length(named));
	report_state(OUTBOX_WORKER_BROKER_UNREACHABLE, reason, reason);
	return false;
}

/*
 * Hold topic's events in the retry table while its cluster is down, or
 * has events handed off.
 */
static void
hold_topic(const char *topic)
{
	ListCell   *lc;
	MemoryContext old;

	foreach(lc, held_topics)
	{
		if (strcmp(lfirst(lc), topic) == 0)
			return;
	}
	old = MemoryContextSwitchTo(held_cxt);
	held_topics = lappend(held_topics, pstrdup(topic));
	MemoryContextSwitchTo(old);
}

/*
 * The producer of each event of batch, by settings, and each record made
 * as the format of its topic says (outbox_format_prepare: the key and the
 * headers); an event whose cluster is down, or has events handed off, is
 * released, not sent, and its topic held (see held_topics).  Events of one
 * key go to one cluster: they share a topic.
 */
static OutboxProducer **
route_batch(OutboxBatch *batch, const OutboxTopicSettings *settings)
{
	OutboxProducer **producer_of = palloc(sizeof(OutboxProducer *) * (batch->count + 1));

	for (int i = 0; i < batch->count; i++)
	{
		OutboxEvent *ev = &batch->events[i];

		if (i > 0 && ev->topic != NULL && batch->events[i - 1].topic != NULL &&
			strcmp(ev->topic, batch->events[i - 1].topic) == 0)
			producer_of[i] = producer_of[i - 1];
		else
			producer_of[i] = producer_of_topic(settings, ev->topic);
		if (ev->outcome == OUTBOX_IN_FLIGHT)
			outbox_format_prepare(outbox_topic_setting(settings, ev->topic), ev);
		if (ev->outcome == OUTBOX_IN_FLIGHT &&
			(!outbox_kafka_reachable(producer_of[i]) || outbox_kafka_busy(producer_of[i])))
		{
			ev->outcome = OUTBOX_RELEASED;
			hold_topic(ev->topic);
		}
	}
	return producer_of;
}

/*
 * Start publishing batch to every cluster it has events for.
 */
static void
start_batch(OutboxBatch *batch, OutboxProducer **producer_of, HTAB *stopped_keys)
{
	ListCell   *lc;

	foreach(lc, outbox_kafka_producers())
	{
		for (int i = 0; i < batch->count; i++)
		{
			if (producer_of[i] == lfirst(lc))
			{
				outbox_kafka_start(lfirst(lc), batch, producer_of, stopped_keys);
				break;
			}
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
	report_state(state, why, why);
	if (strncmp(said_waiting, why, sizeof(said_waiting) - 1) != 0)
		ereport(LOG,
				(errmsg("outbox worker waits: %s", why)));
	strlcpy(said_waiting, why, sizeof(said_waiting));
	return STEP_WAIT;
}

/*
 * Say in shared memory whether the database holds events that are not
 * delivered, for DROP DATABASE (utility.c), unless it said there were
 * none and no commit has said otherwise since: looked at with a snapshot
 * taken after, and said unless a backend said something in between.
 * Cheap: a few index probes.  The caller holds a transaction.
 */
static void
note_undelivered(const OutboxExtension *ext)
{
	uint64		seen = pg_atomic_read_u64(&my_slot->undelivered);
	bool		some;

	if ((seen & PG_UINT32_MAX) == OUTBOX_UNDELIVERED_NONE)
		return;
	PushActiveSnapshot(GetLatestSnapshot());
	some = outbox_events_undelivered(ext);
	PopActiveSnapshot();
	outbox_slot_note_undelivered(my_slot, seen, some);
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
		note_undelivered(ext);
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
 * Claim the next batch, with a snapshot of its own, none of the events of
 * in_flight (NULL for none) again.
 */
static OutboxBatch *
claim_next(const OutboxExtension *ext, const OutboxBatch *in_flight)
{
	OutboxBatch *batch;

	pgstat_report_activity(STATE_RUNNING, "claiming due events");
	PushActiveSnapshot(GetTransactionSnapshot());
	batch = outbox_claim_batch(ext, outbox_batch_size, OUTBOX_BATCH_MAX_BYTES, in_flight,
							   held_topics);
	PopActiveSnapshot();
	if (batch->count > 0)
		run_batches = lappend(run_batches, batch);
	return batch;
}

/* Record the outcomes of a batch, summing its statistics in run_stats. */
static void
record_batch(const OutboxExtension *ext, OutboxBatch *batch)
{
	OutboxRetryPolicy policy = outbox_retry_policy();

	pgstat_report_activity(STATE_RUNNING, "recording delivery outcomes");
	outbox_record_outcomes(ext, batch, outbox_published_retention != 0, &policy,
						   run_stats);
}

/*
 * Record a batch that was sent; *wrote_retries if an event of it is due
 * again (failed, released, handed off).
 */
static void
record_sent(const OutboxExtension *ext, OutboxBatch *batch, bool *wrote_retries)
{
	record_batch(ext, batch);
	for (int i = 0; i < batch->count; i++)
		*wrote_retries |= batch->events[i].outcome != OUTBOX_DELIVERED;
}

/*
 * Wait until every cluster has finished the batch it was sent, or handed
 * it off; false if one was cut short (see outbox_kafka_finish).
 */
static bool
wait_sent(const OutboxBatch *batch)
{
	pgstat_report_activity(STATE_RUNNING,
						   psprintf("publishing %d events", batch->count));
	return outbox_kafka_finish();
}

/* Is the worker asked to stop, restart or reload? */
static bool
asked_to_stop(void)
{
	bool		restart;

	outbox_slot_lock();
	restart = my_slot->restart_requested;
	outbox_slot_unlock();
	return ShutdownRequestPending || restart || ConfigReloadPending;
}

/*
 * Should the transaction that started at start, having claimed bytes of
 * events, claim another batch?
 */
static bool
run_goes_on(TimestampTz start, int64 bytes)
{
	return !asked_to_stop() && bytes < RUN_MAX_BYTES &&
		!TimestampDifferenceExceeds(start, GetCurrentTimestamp(), RUN_MAX_MS);
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
 * Could a claim find anything now that the last one (last; NULL: none in
 * this transaction yet) did not?  Only if that one stopped at its limits,
 * if this transaction has put events in the retry table since (wrote
 * retries), or if a transaction that enqueued has committed since it
 * began: such a commit counts itself in the slot once it is visible
 * (launcher.c), so one that the last claim's snapshot missed counted after
 * *commits was read.  Events of the retry table that come due with time
 * wait for the next turn.  If so, *commits gets the count as the next
 * claim begins.
 */
static bool
claim_may_find(const OutboxBatch *last, bool wrote_retries, uint64 *commits)
{
	uint64		counted = pg_atomic_read_u64(&my_slot->undelivered) >> 32;

	if (last != NULL && !last->full && !wrote_retries && counted == *commits)
		return false;
	*commits = counted;
	/* read before the claim takes its snapshot */
	pg_memory_barrier();
	return true;
}

/*
 * Wait until until, so that the commits of the while share the next batch:
 * under a steady stream of commits, batches a wake_delay apart, not as many
 * as the worker can turn (docs/design.md, "Batches in one transaction").  False
 * if the worker is asked to stop, restart or reload meanwhile.  Commits
 * set the latch: they are counted in the slot (claim_may_find).
 */
static bool
share_batch(TimestampTz until)
{
	pgstat_report_activity(STATE_RUNNING, "letting commits gather");
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		if (asked_to_stop())
			return false;
		if (left <= 0)
			return true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Publish batches in one transaction (docs/design.md, "Batches in one
 * transaction").  Returns how
 * long to wait before the next turn: 0 after a transaction cut short by
 * its time, poll_interval once a claim found nothing; negative (not
 * wakeable) when a standby lags, or for the rest of wake_delay after the
 * transaction's time; and *undo if the transaction is to be undone, having
 * produced nothing.
 */
static long
run_batches_of(const OutboxExtension *ext, bool *undo)
{
	TimestampTz now = GetCurrentTimestamp();
	OutboxBatch *sending = NULL;	/* started, not finished */
	OutboxTopicSettings *settings;
	HTAB	   *stopped_keys;
	bool		complete = true;
	long		delay = 0;
	int64		bytes = 0;
	uint64		commits = 0;
	bool		wrote_retries = false;
	TimestampTz last_claim = 0;

	*undo = false;
	/* idle: a cheap look first, and no producer after a while */
	if (idle && !outbox_kafka_late_pending() && !outbox_events_due(ext))
	{
		note_undelivered(ext);
		if (TimestampDifferenceExceeds(last_events_at, now,
									   Max(2 * (int64) outbox_delivery_timeout,
										   PRODUCER_IDLE_MIN_MS)))
			outbox_kafka_shutdown();
		else
			outbox_kafka_refresh();
		set_state(OUTBOX_WORKER_IDLE, NULL);
		return outbox_poll_interval;
	}
	/* read once per transaction: nothing is in flight between them */
	settings = outbox_topic_settings_load(ext);
	if (!ensure_producers(ext, settings))
		return ERROR_PAUSE_MS;

	stopped_keys = outbox_kafka_stopped_keys();
	for (;;)
	{
		OutboxBatch *next = NULL;
		OutboxBatch *last = sending;
		char	   *reason;

		/*
		 * A batch that was not full: the stream is slower than the worker.
		 * Record the batch, then let the commits of the rest of wake_delay
		 * share the next one.
		 */
		if (sending != NULL && !sending->full && outbox_wake_delay > 0)
		{
			TimestampTz until = TimestampTzPlusMilliseconds(last_claim, outbox_wake_delay);

			complete = wait_sent(sending);
			record_sent(ext, sending, &wrote_retries);
			sending = NULL;
			if (!complete)
				break;
			/* the run is over first: commit, and wait out of the transaction */
			if (!run_goes_on(now, bytes) ||
				until > TimestampTzPlusMilliseconds(now, RUN_MAX_MS))
			{
				delay = -TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);
				break;
			}
			if (!share_batch(until))
				break;
		}
		/* else the next batch is claimed while the one sent is acknowledged */
		if (last == NULL || run_goes_on(now, bytes))
		{
			if (claim_may_find(last, wrote_retries, &commits))
			{
				last_claim = GetCurrentTimestamp();
				next = claim_next(ext, sending);
				wrote_retries = next->held_back;
			}
			for (int i = 0; next != NULL && i < next->count; i++)
				bytes += next->events[i].bytes;
			/* what the claim moved to the retry table is due once recorded */
			if (next == NULL || next->count == 0)
			{
				delay = next != NULL && next->held_back ? 0 : outbox_poll_interval;
				next = NULL;
			}
		}
		idle = last == NULL && next == NULL;
		if (idle)
		{
			note_undelivered(ext);
			set_state(OUTBOX_WORKER_IDLE, NULL);
			return outbox_poll_interval;
		}
		last_events_at = now;
		if (sending != NULL)
			complete = wait_sent(sending);

		if (next != NULL &&
			!outbox_standbys_have(flush_commits_of(next), STANDBY_WAIT_MS, &reason))
		{
			report_state(OUTBOX_WORKER_WAITING_FOR_STANDBY, reason, reason);
			delay = -STANDBY_PAUSE_MS;
			/* nothing produced or recorded yet: the caller undoes the claim */
			*undo = !batch_produced && run_late == NULL;
			if (*undo)
				return delay;
			complete = false;
		}

		/* the next batch is sent while the previous one is recorded */
		if (next != NULL && complete)
		{
			report_state(OUTBOX_WORKER_PUBLISHING, NULL,
						 psprintf("publishing %d events", next->count));
			batch_produced = true;
			start_batch(next, route_batch(next, settings), stopped_keys);
		}
		if (sending != NULL)
			record_sent(ext, sending, &wrote_retries);
		if (next != NULL && !complete)
		{
			/* not sent: released, due again untouched */
			for (int i = 0; i < next->count; i++)
				if (next->events[i].outcome == OUTBOX_IN_FLIGHT)
					next->events[i].outcome = OUTBOX_RELEASED;
			record_batch(ext, next);
			next = NULL;
		}
		if (next == NULL)
			break;
		sending = next;
	}
	if (!complete)
		return Min(delay, 0);	/* a standby lags, or no broker answers */
	/* the last claim found nothing: what was sent is delivered, unrecorded */
	if (delay > 0)
		note_undelivered(ext);
	set_state(OUTBOX_WORKER_IDLE, NULL);
	return delay;
}

/*
 * Write the statistics of the committed batches and of this transaction's
 * if it is time to; outbox_stats_written() says they were, after commit.
 */
static void
write_stats(const OutboxExtension *ext, bool now)
{
	HTAB	   *all;

	if (!now && !TimestampDifferenceExceeds(stats_written_at, GetCurrentTimestamp(),
											STATS_INTERVAL_MS))
		return;
	if (hash_get_num_entries(unwritten_stats) + hash_get_num_entries(run_stats) == 0)
		return;
	all = outbox_stats_create(CurrentMemoryContext);
	outbox_stats_merge(all, unwritten_stats);
	outbox_stats_merge(all, run_stats);
	outbox_stats_write(ext, all);
	stats_writing = true;
}

/*
 * After the commit of a turn's transaction: the statistics it wrote are
 * written, those it summed are kept until they are.
 */
static void
stats_committed(void)
{
	if (stats_writing)
	{
		outbox_stats_clear(unwritten_stats);
		stats_written_at = GetCurrentTimestamp();
	}
	else
		outbox_stats_merge(unwritten_stats, run_stats);
	stats_writing = false;
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
				record_batch(&ext, batch);
		}
		write_stats(&ext, true);
	}
	end_work(cxt);
	stats_committed();
	foreach(lc, batches)
		count_outcomes(lfirst(lc));
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
	List	   *batches = run_batches;

	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	outbox_kafka_forget_batch();
	run_batches = NIL;
	run_late = NULL;
	batch_produced = false;
	stats_writing = false;
	run_stats = outbox_stats_create(cxt);

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
			stats_writing = false;
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
	ListCell   *lc;

	begin_work("claiming due events", cxt);
	run_stats = outbox_stats_create(cxt);
	step = next_step(&ext);
	if (step != STEP_PUBLISH)
	{
		end_work(cxt);
		*exit = step == STEP_EXIT;
		return WAITING_MS;
	}
	delay = run_batches_of(&ext, &undo);
	if (undo)
		undo_work(cxt);
	else
	{
		write_stats(&ext, false);
		end_work(cxt);
		stats_committed();
	}
	foreach(lc, run_batches)
		count_outcomes(lfirst(lc));
	if (run_late != NULL)
		count_outcomes(run_late);
	run_batches = NIL;
	run_late = NULL;
	batch_produced = false;
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

	if (outbox_worker_idle_timeout < 0 || !idle || now < next_park_look ||
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

	stats_cxt = AllocSetContextCreate(TopMemoryContext, "outbox unwritten statistics",
									  ALLOCSET_SMALL_SIZES);
	unwritten_stats = outbox_stats_create(stats_cxt);

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
	last_events_at = GetCurrentTimestamp();
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
