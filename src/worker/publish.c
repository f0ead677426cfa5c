/*-------------------------------------------------------------------------
 *
 * publish.c
 *		The batches of one of the worker's transactions: each claimed, its
 *		commits flushed and past the standby gate, routed to the producer
 *		of its cluster, started and finished, and recorded; the late
 *		reports of events handed off; the topics held while their cluster
 *		is down or busy.
 *
 * worker.c runs each turn's transaction and says what the worker does in
 * its slot (the function given to outbox_publish_init); this publishes in
 * it.  docs/design.md, "Batches in one transaction" and "Producers per
 * cluster", says why.
 *
 * src/worker/publish.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <signal.h>

#include "access/clog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "base/guc.h"
#include "format/format.h"
#include "format/topics.h"
#include "kafka/kafka.h"
#include "kafka/registry.h"
#include "launcher/launcher.h"
#include "queue/claim.h"
#include "queue/record.h"
#include "queue/stats.h"
#include "worker/publish.h"
#include "worker/standby.h"

/* how long the worker waits while no cluster answers */
#define UNREACHABLE_PAUSE_MS 1000
/*
 * The producers are closed once the worker has had no events to publish
 * for twice outbox.delivery_timeout, and at least this long: librdkafka's
 * threads cost about a millisecond of CPU per second even when idle, which
 * adds up over many databases.  By then every report of what they were
 * sent has come, late ones of events handed off included.
 */
#define PRODUCER_IDLE_MIN_MS 10000
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
/*
 * The worker lets commits gather for a wake_delay only while they come at
 * least GATHER_MIN_COMMITS a wake_delay, at their pace over the last
 * PACE_MEMORY wake_delays or so (outbox_publish_gathers).
 */
#define GATHER_MIN_COMMITS 2
#define PACE_MEMORY 32

/* the slot of this worker, and how it says what it does there */
static OutboxWorkerSlot *my_slot = NULL;
static OutboxSetState set_state = NULL;

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
/* did the last batch find nothing, and when did one last find something */
static bool idle = false;
static TimestampTz last_events_at = 0;

/*
 * The pace of commits (outbox_publish_gathers): how many a wake_delay
 * brings, a mean that decays over PACE_MEMORY wake_delays; for the
 * wake_delay of paced_delay, from the slot's count of commits as it was
 * read last, at paced_at.
 */
static double commits_per_wait = 0;
static uint32 paced_count = 0;
static TimestampTz paced_at = 0;
static int	paced_delay = 0;

/*
 * Publish for the worker of slot, which says what it does with
 * set_state_fn; before the first batch.
 */
void
outbox_publish_init(OutboxWorkerSlot *slot, OutboxSetState set_state_fn)
{
	my_slot = slot;
	set_state = set_state_fn;
	last_events_at = GetCurrentTimestamp();
	paced_count = (uint32) (pg_atomic_read_u64(&my_slot->undelivered) >> 32);
	paced_at = last_events_at;
	paced_delay = outbox_wake_delay;
}

/*
 * Is a batch of the current transaction produced?  Then SIGTERM lets the
 * transaction finish (kafka.c gives it a grace).  For a signal handler.
 */
bool
outbox_publish_produced(void)
{
	return batch_produced;
}

/*
 * When the worker last had events to publish, if the last claim found
 * none; 0 otherwise.
 */
TimestampTz
outbox_publish_idle_since(void)
{
	return idle ? last_events_at : 0;
}

/*
 * The batches of the transaction that ended (NIL if none), and in *late
 * (unless NULL) the late reports it recorded (NULL if none), for the
 * caller to count or, if it failed, to record again; forgotten here.
 */
List *
outbox_publish_forget(OutboxBatch **late)
{
	List	   *batches = run_batches;

	if (late != NULL)
		*late = run_late;
	run_batches = NIL;
	run_late = NULL;
	batch_produced = false;
	return batches;
}

/*
 * Count a recorded batch's outcomes in shared memory, and keep Kafka's last
 * refusal there until an event of its topic is delivered: a failing topic
 * shows in outbox_worker_status() while the worker is idle.
 */
void
outbox_publish_count(OutboxBatch *batch)
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
	return outbox_kafka_producer(setting ? &setting->cluster : NULL);
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
					   outbox_stats_current());
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
									   outbox_kafka_producer(&settings->rows[i].cluster));
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

/*
 * Say in shared memory whether the database holds events that are not
 * delivered, for DROP DATABASE (utility.c), unless it said there were
 * none and no commit has said otherwise since: looked at with a snapshot
 * taken after, and said unless a backend said something in between.
 * Cheap: a few index probes.  The caller holds a transaction.
 */
void
outbox_publish_note_undelivered(const OutboxExtension *ext)
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

/* Record the outcomes of a batch, summing its statistics in memory. */
void
outbox_publish_record(const OutboxExtension *ext, OutboxBatch *batch)
{
	OutboxRetryPolicy policy = outbox_retry_policy();

	pgstat_report_activity(STATE_RUNNING, "recording delivery outcomes");
	outbox_record_outcomes(ext, batch, outbox_published_retention != 0, &policy,
						   outbox_stats_current());
}

/*
 * Record a batch that was sent; *wrote_retries if an event of it is due
 * again (failed, released, handed off).
 */
static void
record_sent(const OutboxExtension *ext, OutboxBatch *batch, bool *wrote_retries)
{
	outbox_publish_record(ext, batch);
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
 * Does letting the commits of a wake_delay gather in one batch pay, at the
 * pace they come?  Only while a wake_delay brings GATHER_MIN_COMMITS or
 * more: the wait then saves a batch or more (what the worker spends is
 * mostly per batch), where at a slower pace it would only add its length
 * to each commit's latency (docs/design.md, "Batches in one transaction").
 * The pace is the slot's count of commits that enqueued (claim_may_find),
 * in a mean that forgets over PACE_MEMORY wake_delays: a lone commit after
 * a quiet while is published at once; a steady stream, or a burst of a few
 * dozen commits, makes the worker wait, and it goes on waiting for about
 * that long after they stop.  A change of wake_delay starts the mean
 * again; the commits counted since the last call are taken as having come
 * now.
 */
bool
outbox_publish_gathers(void)
{
	uint32		count = (uint32) (pg_atomic_read_u64(&my_slot->undelivered) >> 32);
	TimestampTz now = GetCurrentTimestamp();

	if (outbox_wake_delay <= 0 || paced_delay != outbox_wake_delay)
		commits_per_wait = 0;
	else
		commits_per_wait = commits_per_wait *
			exp(-(double) (now - paced_at) / (1000.0 * PACE_MEMORY * outbox_wake_delay)) +
			(double) (uint32) (count - paced_count) / PACE_MEMORY;
	paced_count = count;
	paced_at = now;
	paced_delay = outbox_wake_delay;
	return commits_per_wait >= GATHER_MIN_COMMITS;
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
long
outbox_publish_run(const OutboxExtension *ext, bool *undo)
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
		outbox_publish_note_undelivered(ext);
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
		return UNREACHABLE_PAUSE_MS;

	stopped_keys = outbox_kafka_stopped_keys();
	for (;;)
	{
		OutboxBatch *next = NULL;
		OutboxBatch *last = sending;
		char	   *reason;

		/*
		 * A batch that was not full: the stream is slower than the worker.
		 * If commits come fast enough, record the batch, then let the
		 * commits of the rest of wake_delay share the next one.
		 */
		if (sending != NULL && !sending->full && outbox_publish_gathers())
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
			outbox_publish_note_undelivered(ext);
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
			outbox_publish_record(ext, next);
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
		outbox_publish_note_undelivered(ext);
	set_state(OUTBOX_WORKER_IDLE, NULL);
	return delay;
}
