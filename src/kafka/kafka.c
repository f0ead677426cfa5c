/*-------------------------------------------------------------------------
 *
 * kafka.c
 *		The producers, one per Kafka cluster: building each (with
 *		properties.c), producing a batch's part in waves, every cluster's
 *		part served at once, delivery reports, a slow cluster's part handed
 *		off and its late reports, broker outages and the probe.
 *		librdkafka's own threads never call back into PostgreSQL: logs,
 *		errors and delivery reports are served on the worker's main thread,
 *		in short slices with interrupt checks in between.  docs/design.md,
 *		"Producers per cluster" and "Order per key", says why.
 *
 * src/kafka/kafka.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <librdkafka/rdkafka.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/guc.h"
#include "kafka/kafka.h"
#include "kafka/properties.h"

/*
 * how long all brokers of a cluster may be down before the batch in flight
 * is released, when no other cluster publishes part of it
 */
#define OUTAGE_GRACE_MS 2000
/* how long SIGTERM waits for deliveries in flight */
#define SHUTDOWN_GRACE_MS 5000
/* how long past delivery_timeout an event may stay without a report */
#define DEADLINE_SLACK_MS 1000
/* one slice of waiting for delivery reports */
#define POLL_SLICE_MS 10
/* how long a batch may wait for its topics' metadata, and in what slices */
#define METADATA_TIMEOUT_MS 5000
#define METADATA_SLICE_MS 500
/* a slice of that wait while another cluster's part of the batch waits too */
#define METADATA_SHARED_SLICE_MS 40
/*
 * With several clusters, how long a cluster's part of a batch may go
 * without progress (a wave answered, its topics looked up) before it is
 * handed off: its unanswered events recorded as due later, the rest
 * released (see hand_off).  Twice what the cluster's answers took lately,
 * within these bounds: a cluster far away is not handed off at every
 * batch, and the other clusters' events are recorded within a second of
 * their commit whatever one of them does.
 */
#define HANDOFF_GRACE_MS 300
#define HANDOFF_GRACE_MAX_MS 800
/*
 * How long the part of a batch of a worker's one cluster may make no
 * progress while the worker is asked to give its slot, before it is handed
 * off: a cluster that hangs holds back no other database's turn, one that
 * is merely slow finishes its wave.  Less than the 2 s that the launcher
 * gives a worker to give its slot before it asks another.
 */
#define YIELD_GRACE_MS 1500

/*
 * What a record costs in a request beside what outbox.max_message_bytes
 * counts (the event_id header, the record's framing), and what a request
 * costs beside its records.  A wave of events fits in
 * outbox.max_message_bytes counted that way, and the producer's
 * message.max.bytes leaves room for the request around it.
 */
#define RECORD_OVERHEAD_BYTES 100
#define REQUEST_FRAMING_BYTES 1024

/* PostgreSQL counts time from 2000-01-01, Kafka from 1970-01-01 */
#define UNIX_EPOCH_OFFSET_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/*
 * What a producer knows of each topic it has published to, from the
 * metadata it asked for (learn_topics).  A topic is looked up before its
 * first events are produced, and again after an event of it was refused
 * or while its metadata reports an error.
 */
typedef struct TopicState
{
	char		name[OUTBOX_TOPIC_SIZE];	/* hash key */
	bool		known;			/* its metadata had no error at the last look */
	int64		lookup;			/* the batch (batch_first_seq) that looks it up */
	rd_kafka_resp_err_t refusal;	/* the cluster refuses it (topic_refused) */
} TopicState;

/*
 * An event handed off: what recording its late report needs of it, and its
 * message's sequence number.
 */
typedef struct HandedOff
{
	int64		seq;
	TimestampTz sent_at;		/* its wave was produced */
	OutboxEvent ev;
} HandedOff;

/*
 * A producer: one cluster, as the topics' settings name it, with its
 * librdkafka handle, its outage tracking and the part of the batch being
 * published that goes to it.  Strings are malloc'd; the object lives in
 * producer_cxt until the worker exits or the cluster is no longer named.
 */
struct OutboxProducer
{
	/* the cluster, as set for topics; its strings in producer_cxt */
	OutboxCluster cluster;

	rd_kafka_t *rk;				/* NULL: closed */

	/* the settings the handle was built with: the cluster as it was then */
	OutboxCluster built_cluster;
	char	   *built_properties;
	int			built_delivery_timeout;
	int			built_max_message_bytes;

	/*
	 * The properties file the handle read, and the last one it could not
	 * use (path and version, and whether the producer had a handle then),
	 * with why, for the worker's status: "" if none.
	 */
	OutboxFileVersion file_version;
	OutboxFileVersion refused_file_version;
	char		refused_file_path[MAXPGPATH];
	bool		refused_with_handle;
	char		settings_refused[256];

	/* outage tracking, from ALL_BROKERS_DOWN errors, deliveries, statistics */
	bool		brokers_down;
	TimestampTz brokers_down_since;
	/* the log said it is unreachable, and has not said it answers since */
	bool		said_down;
	/* a broker has answered since the handle was opened */
	bool		answered;
	/* when it was opened, closed, or seen down or up, for the status */
	TimestampTz state_since;
	/* broker connections up, from the last statistics; -1 while closed */
	int			brokers_up;
	/* since the worker started */
	int64		published;
	int64		failed;

	/*
	 * The part of the batch being published that goes to this cluster
	 * (current_batch NULL: none).  Each message's opaque is a sequence
	 * number, so a late report for an earlier batch is recognised.  Its
	 * events go in current_order: the known topics' (order[0..nknown))
	 * first, then, once the topics to learn are looked up (learn_handles
	 * while they are), the others, up to nevents; the wave in flight is
	 * order[wave_first..wave_end).  A part is done when every event has
	 * its outcome, cut short (outage, SIGTERM, deadline: purged) or handed
	 * off.
	 */
	OutboxBatch *current_batch;
	int64		batch_first_seq;
	int64		next_seq;
	int			reports_pending;
	int		   *current_order;
	TopicState **current_topics;
	HTAB	   *current_stopped_keys;
	int			nknown;
	int			nevents;
	TopicState **to_learn;
	rd_kafka_topic_t **learn_handles;
	int			nlearn;
	TimestampTz learn_deadline;
	TimestampTz learn_started_at;
	int			wave_first;
	int			wave_end;
	TimestampTz wave_sent_at;	/* 0: the wave sent nothing */
	TimestampTz wave_deadline;
	/* when the part last moved: started, a wave answered, topics learned */
	TimestampTz progress_at;

	/*
	 * How long the cluster's answers took lately (waves, lookups, late
	 * reports), each weighing a third: see handoff_grace().
	 */
	double		answer_ms;
	bool		part_done;
	bool		cut_short;

	/* whether purged events count as a failed attempt */
	bool		purge_is_timeout;

	/*
	 * Events handed off (see hand_off), in handoff_cxt, sorted by sequence
	 * number: their outcomes as their reports come, until
	 * outbox_kafka_late_reports() takes them to be recorded.
	 */
	MemoryContext handoff_cxt;
	HandedOff  *handed_off;
	int			nhanded_off;
	int			handoff_pending;	/* of them, without a report yet */

	HTAB	   *known_topics;
};

/* every producer of the worker, in producer_cxt */
static List *producers = NIL;
static MemoryContext producer_cxt = NULL;

/* see kafka.h */
bool		(*outbox_kafka_yield_requested) (void) = NULL;

/*
 * Raise the error that a property check returned.
 */
static void
report_property_error(const OutboxPropertyError *error)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg_internal("%s", error->message),
			 error->detail[0] ? errdetail_internal("%s", error->detail) : 0,
			 error->hint ? errhint("%s", error->hint) : 0));
}

/*
 * Errors about the event itself, which another attempt cannot fix: the
 * event is abandoned at once.  Errors about the topic or the cluster
 * (authorization, an invalid topic) may be mended by an operator, so they
 * are retried with backoff like any other.
 */
static bool
error_is_permanent(rd_kafka_resp_err_t err)
{
	switch (err)
	{
		case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
		case RD_KAFKA_RESP_ERR_INVALID_RECORD:
		case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
		case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
		case RD_KAFKA_RESP_ERR__INVALID_ARG:
			return true;
		default:
			return false;
	}
}

/*
 * Errors in a topic's metadata that say the cluster refuses the topic, for
 * now: not allowed to this client, not there (and not created on demand),
 * or not creatable.  Its events are refused at once, an attempt each,
 * rather than produced: librdkafka would hold them until
 * outbox.delivery_timeout when the metadata lists the topic's partitions
 * beside the error (a mock cluster's topic_error does), and the rest of
 * the batch with them.  Other errors (no leader yet, a topic being
 * created) pass: librdkafka waits for the topic to become writable.
 */
static bool
topic_refused(rd_kafka_resp_err_t err)
{
	switch (err)
	{
		case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
		case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
		case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
		case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
		case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
		case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
		case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
			return true;
		default:
			return false;
	}
}

/*
 * Set an event's outcome from a librdkafka error code (0: delivered).  A
 * purge releases the event, unless it ends a wait that timed out.  A
 * timeout while every broker of the cluster is down releases it too, the
 * outage not being the event's, but for an event handed off by a cluster
 * that had answered: it was up and sent it, then answered nothing in time
 * (a hang, which librdkafka ends by closing the connections), and that is
 * a failed attempt.  A cluster that never answered since its handle was
 * opened was down all along (its events handed off before it was seen
 * down).
 */
static void
set_outcome(OutboxProducer *p, OutboxEvent *ev, rd_kafka_resp_err_t err,
			bool handed_off)
{
	if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		ev->outcome = OUTBOX_DELIVERED;
		p->published++;
	}
	else if ((err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
			  err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) && !p->purge_is_timeout)
		ev->outcome = OUTBOX_RELEASED;
	else if (err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT && p->brokers_down &&
			 (!handed_off || !p->answered))
		ev->outcome = OUTBOX_RELEASED;
	else if (err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
			 err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
		set_outcome(p, ev, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, handed_off);
	else
	{
		ev->outcome = OUTBOX_REFUSED;
		ev->error = rd_kafka_err2str(err);
		ev->permanent = error_is_permanent(err);
		p->failed++;
	}
}

/* The brokers of cluster (NULL: the outbox.* settings' cluster), now. */
const char *
outbox_cluster_brokers(const OutboxCluster *cluster)
{
	return cluster && cluster->brokers ? cluster->brokers : outbox_brokers;
}

/*
 * The properties file of cluster (NULL: the outbox.* settings' cluster),
 * now: "" for none.
 */
const char *
outbox_cluster_properties_file(const OutboxCluster *cluster)
{
	return cluster && cluster->properties_file ? cluster->properties_file :
		outbox_kafka_properties_file;
}

/*
 * Are a and b (either NULL: the outbox.* settings' cluster) one cluster
 * now: the same brokers and the same properties file?
 */
bool
outbox_cluster_equal(const OutboxCluster *a, const OutboxCluster *b)
{
	return strcmp(outbox_cluster_brokers(a), outbox_cluster_brokers(b)) == 0 &&
		strcmp(outbox_cluster_properties_file(a), outbox_cluster_properties_file(b)) == 0;
}

/* the brokers p connects to */
static const char *
brokers_of(const OutboxProducer *p)
{
	return outbox_cluster_brokers(&p->cluster);
}

/* the properties file p reads, "" for none */
static const char *
properties_file_of(const OutboxProducer *p)
{
	return outbox_cluster_properties_file(&p->cluster);
}

/*
 * p as the messages name it: its brokers, and its properties file if it
 * reads one, which tells apart two producers of the same brokers.  In a
 * static buffer, overwritten by the next call.
 */
static const char *
cluster_name(const OutboxProducer *p)
{
	static char name[2 * MAXPGPATH];

	if (*properties_file_of(p) == '\0')
		snprintf(name, sizeof(name), "%s", brokers_of(p));
	else
		snprintf(name, sizeof(name), "%s (properties file %s)",
				 brokers_of(p), properties_file_of(p));
	return name;
}

/* Say which cluster a message is about. */
static void
cluster_context(void *arg)
{
	errcontext("Kafka cluster %s", cluster_name((OutboxProducer *) arg));
}

/*
 * A broker of p's cluster answered: it is reachable, and if the log said
 * it was not, the log says it is again.
 */
static void
brokers_answered(OutboxProducer *p)
{
	p->answered = true;
	if (p->brokers_down)
	{
		p->brokers_down = false;
		p->state_since = GetCurrentTimestamp();
	}
	if (!p->said_down)
		return;
	p->said_down = false;
	ereport(LOG,
			(errmsg("Kafka cluster %s is reachable again, publishing to it resumes",
					cluster_name(p))));
}

/*
 * The cluster of p answered, since (a wave, a lookup, a late report).
 */
static void
note_answer(OutboxProducer *p, TimestampTz since)
{
	double		ms = (double) (GetCurrentTimestamp() - since) / 1000.0;

	p->answer_ms = p->answer_ms == 0 ? ms : (2 * p->answer_ms + ms) / 3;
}

/*
 * How long p's part of a batch may make no progress before it is handed
 * off: twice what its cluster's answers took lately, within
 * HANDOFF_GRACE_MS and HANDOFF_GRACE_MAX_MS.
 */
static long
handoff_grace(const OutboxProducer *p)
{
	return (long) Min(Max(2 * p->answer_ms, HANDOFF_GRACE_MS), HANDOFF_GRACE_MAX_MS);
}

static int
handed_off_cmp(const void *a, const void *b)
{
	int64		x = ((const HandedOff *) a)->seq;
	int64		y = ((const HandedOff *) b)->seq;

	return (x > y) - (x < y);
}

/* The event of p handed off whose message is seq, or NULL. */
static HandedOff *
handed_off_event(OutboxProducer *p, int64 seq)
{
	HandedOff	key;

	if (p->nhanded_off == 0)
		return NULL;
	key.seq = seq;
	return bsearch(&key, p->handed_off, p->nhanded_off, sizeof(HandedOff),
				   handed_off_cmp);
}

/* Delivery report callback; runs inside rd_kafka_poll on the main thread. */
static void
delivery_report(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	OutboxProducer *p = opaque;
	int64		seq = (int64) (intptr_t) msg->_private;
	HandedOff  *late = handed_off_event(p, seq);
	OutboxEvent *ev = late ? &late->ev : NULL;

	if (!late && p->current_batch != NULL && seq >= p->batch_first_seq &&
		seq < p->batch_first_seq + p->current_batch->count)
		ev = &p->current_batch->events[seq - p->batch_first_seq];
	if (ev == NULL || ev->outcome != OUTBOX_IN_FLIGHT)
		return;
	if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		ev->partition = msg->partition;
		ev->offset = msg->offset;
		brokers_answered(p);
		if (late)
			note_answer(p, late->sent_at);
	}
	set_outcome(p, ev, msg->err, late != NULL);
	if (late)
		p->handoff_pending--;
	else
		p->reports_pending--;
}

/* Error callback; runs inside rd_kafka_poll on the main thread. */
static void
error_report(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	OutboxProducer *p = opaque;

	if (err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
	{
		ereport(LOG,
				(errmsg("Kafka error: %s", rd_kafka_err2str(err)),
				 errdetail("%s", reason),
				 errcontext("Kafka cluster %s", cluster_name(p))));
		return;
	}
	if (!p->brokers_down)
	{
		p->brokers_down = true;
		p->brokers_down_since = p->state_since = GetCurrentTimestamp();
	}
	/* once per outage, however often librdkafka says it */
	ereport(p->said_down ? DEBUG1 : LOG,
			(errmsg("Kafka cluster %s is unreachable: no broker answers",
					cluster_name(p)),
			 errdetail("%s", reason)));
	p->said_down = true;
}

/*
 * Statistics callback (every second, inside rd_kafka_poll): count the
 * brokers whose connection is up, for outbox_worker_status(), but for
 * librdkafka's internal one.  Served in order with the errors, so a count
 * after ALL_BROKERS_DOWN is one taken after it: a broker is up again.
 */
static int
stats_report(rd_kafka_t *rk, char *json, size_t json_len, void *opaque)
{
	OutboxProducer *p = opaque;
	const char *source = "\"source\":\"";

	p->brokers_up = 0;
	for (const char *s = json; (s = strstr(s, source)) != NULL;)
	{
		bool		internal;

		s += strlen(source);
		internal = strncmp(s, "internal\"", strlen("internal\"")) == 0;
		s = strstr(s, "\"state\":\"");
		if (s == NULL)
			break;
		s += strlen("\"state\":\"");
		if (!internal && strncmp(s, "UP\"", 3) == 0)
			p->brokers_up++;
	}
	if (p->brokers_up > 0)
		brokers_answered(p);
	return 0;					/* librdkafka frees json */
}

/* Log callback, served from the log queue on the main thread. */
static void
log_report(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	ereport(level <= 3 ? LOG : DEBUG1,
			(errmsg("librdkafka %s: %s", fac, buf),
			 errcontext("Kafka cluster %s",
						cluster_name((OutboxProducer *) rd_kafka_opaque(rk)))));
}

/*
 * Set one property the extension owns; destroys conf on failure.
 */
static void
conf_set_or_error(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char		errbuf[512];

	if (rd_kafka_conf_set(conf, name, value, errbuf, sizeof(errbuf)) != RD_KAFKA_CONF_OK)
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Kafka producer property \"%s\"", name),
				 errdetail("%s", errbuf)));
	}
}

/*
 * A configuration of p from the settings: defaults, then
 * outbox.kafka_properties, then its properties file (*file_version gets
 * what was read of it), then what the guarantees depend on.
 */
static rd_kafka_conf_t *
make_conf(OutboxProducer *p, OutboxFileVersion *file_version)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	OutboxPropertyError error;
	char		value[32];

	memset(file_version, 0, sizeof(*file_version));
	conf_set_or_error(conf, "client.id", "postgresql-outbox");
	conf_set_or_error(conf, "partitioner", "murmur2_random");
	/* Nagle's algorithm holds small produce requests back by up to 40 ms */
	conf_set_or_error(conf, "socket.nagle.disable", "true");
	/* the check hook refused secrets where they came from a catalog */
	if (!outbox_kafka_apply_property_list(conf, outbox_kafka_properties, true, &error) ||
		(*properties_file_of(p) != '\0' &&
		 !outbox_kafka_apply_property_file(conf, properties_file_of(p), file_version, &error)))
	{
		rd_kafka_conf_destroy(conf);
		report_property_error(&error);
	}

	conf_set_or_error(conf, "bootstrap.servers", brokers_of(p));
	conf_set_or_error(conf, "enable.idempotence", "true");
	conf_set_or_error(conf, "acks", "all");
	/*
	 * A wave is queued whole before the flush sends it, in one request per
	 * partition; linger.ms only has to outlast the queuing, and must stay
	 * below message.timeout.ms.
	 */
	snprintf(value, sizeof(value), "%d", Min(outbox_delivery_timeout / 2, 1000));
	conf_set_or_error(conf, "linger.ms", value);
	conf_set_or_error(conf, "batch.num.messages", "1000000");
	conf_set_or_error(conf, "log.queue", "true");
	conf_set_or_error(conf, "statistics.interval.ms", "1000");
	snprintf(value, sizeof(value), "%d", outbox_delivery_timeout);
	conf_set_or_error(conf, "message.timeout.ms", value);
	snprintf(value, sizeof(value), "%d",
			 Min(outbox_max_message_bytes + REQUEST_FRAMING_BYTES, 1000000000));
	conf_set_or_error(conf, "message.max.bytes", value);
	conf_set_or_error(conf, "batch.size", value);

	rd_kafka_conf_set_dr_msg_cb(conf, delivery_report);
	rd_kafka_conf_set_error_cb(conf, error_report);
	rd_kafka_conf_set_log_cb(conf, log_report);
	rd_kafka_conf_set_stats_cb(conf, stats_report);
	rd_kafka_conf_set_opaque(conf, p);
	return conf;
}

static char *
malloc_strdup(const char *s)
{
	char	   *copy = strdup(s);

	if (copy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return copy;
}

/*
 * Can p's properties file be used, as it is now (version)?  One that
 * cannot (missing, open to other users, not a regular file, a property
 * refused) is reported once per path and version, in the log and in the
 * worker's status.  A producer that has a handle keeps the settings it was
 * built with, as the server keeps a setting whose new value in
 * postgresql.conf is refused: a file changed under it and a setting
 * changed to a file that cannot be used alike.  One that has none (not
 * built yet, or closed while idle) stays closed, and its cluster's topics
 * wait as those of a cluster that is down: the other clusters go on.
 */
static bool
properties_file_usable(OutboxProducer *p, const OutboxFileVersion *version)
{
	const char *path = properties_file_of(p);
	const char *meanwhile = p->rk != NULL ? "the producer keeps its settings" :
		"its topics wait";
	OutboxPropertyError error;

	if (p->settings_refused[0] != '\0' &&
		p->refused_with_handle == (p->rk != NULL) &&
		strcmp(p->refused_file_path, path) == 0 &&
		outbox_kafka_same_file_version(version, &p->refused_file_version))
		return false;
	if (outbox_kafka_check_properties_file(path, &error))
		return true;
	ereport(LOG,
			(errmsg("Kafka properties file \"%s\" cannot be used, %s", path, meanwhile),
			 errdetail_internal("%s%s%s", error.message,
								error.detail[0] ? ": " : "", error.detail)));
	snprintf(p->settings_refused, sizeof(p->settings_refused),
			 "%s; %s", error.message, meanwhile);
	strlcpy(p->refused_file_path, path, sizeof(p->refused_file_path));
	p->refused_file_version = *version;
	p->refused_with_handle = p->rk != NULL;
	return false;
}

/*
 * Why producer p (NULL: the first that has a reason) keeps settings other
 * than the current ones, or stays closed, its properties file not usable
 * (see properties_file_usable); NULL if it does not.
 */
const char *
outbox_kafka_settings_refused(const OutboxProducer *p)
{
	ListCell   *lc;

	if (p != NULL)
		return p->settings_refused[0] != '\0' ? p->settings_refused : NULL;
	foreach(lc, producers)
	{
		OutboxProducer *q = lfirst(lc);

		if (q->settings_refused[0] != '\0')
			return q->settings_refused;
	}
	return NULL;
}

/*
 * Forget the events p handed off: their reports, if any come, are lost,
 * and the events are due again when their hand-off said.
 */
static void
forget_handed_off(OutboxProducer *p)
{
	if (p->handoff_cxt != NULL)
		MemoryContextReset(p->handoff_cxt);
	p->handed_off = NULL;
	p->nhanded_off = 0;
	p->handoff_pending = 0;
}

/*
 * Close p's handle, if it has one, keeping the object.  Nothing may be in
 * flight but events handed off, which are forgotten.  The status then shows brokers_up as unknown.
 */
static void
close_producer(OutboxProducer *p)
{
	if (p->rk == NULL)
		return;
	rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_poll(p->rk, 0);
	rd_kafka_destroy(p->rk);
	p->rk = NULL;
	forget_handed_off(p);
	if (p->known_topics != NULL)
		hash_destroy(p->known_topics);
	p->known_topics = NULL;
	free(unconstify(char *, p->built_cluster.brokers));
	free(unconstify(char *, p->built_cluster.properties_file));
	free(p->built_properties);
	p->built_cluster.brokers = p->built_cluster.properties_file = NULL;
	p->built_properties = NULL;
	p->brokers_up = -1;
	p->brokers_down = false;
	p->answered = false;
	p->state_since = GetCurrentTimestamp();
}

/*
 * The producer of a cluster as the topics' settings name it (NULL: the
 * outbox.* settings' cluster), made if there is none yet; its handle is
 * built by outbox_kafka_configure().  Settings that name one cluster now
 * (outbox_cluster_equal) share a producer: one cluster, one producer, one
 * row of the status.
 */
OutboxProducer *
outbox_kafka_producer(const OutboxCluster *cluster)
{
	ListCell   *lc;
	OutboxProducer *p;
	MemoryContext old;

	foreach(lc, producers)
	{
		p = lfirst(lc);
		if (outbox_cluster_equal(&p->cluster, cluster))
			return p;
	}
	if (producer_cxt == NULL)
		producer_cxt = AllocSetContextCreate(TopMemoryContext, "outbox producers",
											 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(producer_cxt);
	p = palloc0(sizeof(OutboxProducer));
	if (cluster != NULL && cluster->brokers != NULL)
		p->cluster.brokers = pstrdup(cluster->brokers);
	if (cluster != NULL && cluster->properties_file != NULL)
		p->cluster.properties_file = pstrdup(cluster->properties_file);
	p->brokers_up = -1;
	p->state_since = GetCurrentTimestamp();
	p->next_seq = 1;
	producers = lappend(producers, p);
	MemoryContextSwitchTo(old);
	return p;
}

/*
 * Every producer, for the worker to go through; the list is kafka.c's.
 */
List *
outbox_kafka_producers(void)
{
	return producers;
}

/*
 * Close p and forget it: its cluster is no longer named.  Nothing may be
 * in flight.
 */
void
outbox_kafka_drop(OutboxProducer *p)
{
	close_producer(p);
	producers = list_delete_ptr(producers, p);
	if (p->handoff_cxt != NULL)
		MemoryContextDelete(p->handoff_cxt);
	if (p->cluster.brokers)
		pfree(unconstify(char *, p->cluster.brokers));
	if (p->cluster.properties_file)
		pfree(unconstify(char *, p->cluster.properties_file));
	pfree(p);
}

/*
 * Make sure p has a handle built from the current settings: build one if
 * it has none, or if the settings (SIGHUP) or its properties file changed
 * since.  Call only between batches, when nothing is in flight.
 */
void
outbox_kafka_configure(OutboxProducer *p)
{
	rd_kafka_conf_t *conf;
	OutboxFileVersion file_version;
	char		errbuf[512];
	bool		same_settings;
	ErrorContextCallback context;

	context.callback = cluster_context;
	context.arg = p;
	context.previous = error_context_stack;
	error_context_stack = &context;

	outbox_kafka_file_version(properties_file_of(p), &file_version);
	same_settings = p->rk != NULL &&
		outbox_cluster_equal(&p->built_cluster, &p->cluster) &&
		strcmp(p->built_properties, outbox_kafka_properties) == 0 &&
		p->built_delivery_timeout == outbox_delivery_timeout &&
		p->built_max_message_bytes == outbox_max_message_bytes;
	if (same_settings && (*properties_file_of(p) == '\0' ||
						  outbox_kafka_same_file_version(&file_version, &p->file_version)))
	{
		p->settings_refused[0] = '\0';
		error_context_stack = context.previous;
		return;
	}
	/* rather than take a file it cannot use, see properties_file_usable */
	if (*properties_file_of(p) != '\0' && !properties_file_usable(p, &file_version))
	{
		error_context_stack = context.previous;
		return;
	}
	if (same_settings)
		ereport(LOG,
				(errmsg("Kafka properties file \"%s\" changed, rebuilding the producer",
						properties_file_of(p))));
	else if (p->rk != NULL)
		ereport(LOG,
				(errmsg("Kafka settings changed, rebuilding the producer")));
	close_producer(p);

	conf = make_conf(p, &file_version);

	/* on success rd_kafka_new owns conf */
	p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errbuf, sizeof(errbuf));
	if (p->rk == NULL)
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not create Kafka producer"),
				 errdetail("%s", errbuf)));
	}
	rd_kafka_set_log_queue(p->rk, NULL);

	p->built_cluster.brokers = malloc_strdup(brokers_of(p));
	p->built_cluster.properties_file = malloc_strdup(properties_file_of(p));
	p->built_properties = malloc_strdup(outbox_kafka_properties);
	p->built_delivery_timeout = outbox_delivery_timeout;
	p->built_max_message_bytes = outbox_max_message_bytes;
	p->file_version = file_version;
	p->settings_refused[0] = '\0';
	p->brokers_down = false;
	p->state_since = GetCurrentTimestamp();
	error_context_stack = context.previous;
}

/*
 * Rebuild each open producer whose settings or properties file changed
 * (an idle worker keeps them current, and says so in the log).
 */
void
outbox_kafka_refresh(void)
{
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);

		if (p->rk != NULL)
			outbox_kafka_configure(p);
	}
}

/*
 * Close every producer's handle (an idle worker, or one that exits).
 * Nothing may be in flight.
 */
void
outbox_kafka_shutdown(void)
{
	ListCell   *lc;

	foreach(lc, producers)
		close_producer(lfirst(lc));
}

/*
 * What outbox_worker_status() and outbox_cluster_status() show of p.
 */
void
outbox_kafka_status(const OutboxProducer *p, OutboxProducerStatus *status)
{
	status->cluster.brokers = brokers_of(p);
	status->cluster.properties_file = properties_file_of(p);
	status->state_since = p->state_since;
	/* a producer whose properties file cannot be used: its topics wait */
	status->open = p->rk != NULL || p->settings_refused[0] != '\0';
	status->reachable = p->rk != NULL && !p->brokers_down;
	status->brokers_up = p->brokers_up;
	status->published = p->published;
	status->failed = p->failed;
}

/*
 * Serve logs and errors while idle.
 */
void
outbox_kafka_serve(void)
{
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);

		if (p->rk != NULL)
			rd_kafka_poll(p->rk, 0);
	}
}

/*
 * False once every broker of p's cluster has been seen down, until a
 * delivery, a probe or the statistics say one answers.
 */
bool
outbox_kafka_reachable(OutboxProducer *p)
{
	return p->rk != NULL && !p->brokers_down;
}

/*
 * Does p have events handed off whose outcome is not recorded yet?  Their
 * topics' events wait (held) until it has none: no later event of a key
 * may overtake one of them, and a cluster that hangs is sent nothing more
 * meanwhile.
 */
bool
outbox_kafka_busy(const OutboxProducer *p)
{
	return p->nhanded_off > 0;
}

/*
 * Ask p's cluster for metadata without waiting: with no broker up,
 * librdkafka connects to one for it, and a broker that answers shows in
 * the next statistics (every second), which make it reachable again.  So
 * a cluster that is down costs the others no wait.  Returns whether it is
 * reachable now.
 */
bool
outbox_kafka_probe(OutboxProducer *p)
{
	const struct rd_kafka_metadata *metadata;

	if (p->rk == NULL)			/* its properties file cannot be used */
		return false;
	if (rd_kafka_metadata(p->rk, 0, NULL, &metadata, 0) == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		rd_kafka_metadata_destroy(metadata);
		brokers_answered(p);
	}
	rd_kafka_poll(p->rk, 0);
	return !p->brokers_down;
}

/*
 * Hand one event to librdkafka; the outcome arrives in a delivery report,
 * or is set here if librdkafka refuses it at once.  The record's timestamp
 * is the event's creation (CreateTime), whenever it is published.
 */
static void
produce_event(OutboxProducer *p, OutboxEvent *ev, int64 seq)
{
	rd_kafka_headers_t *headers = rd_kafka_headers_new(ev->nheaders + 1);
	rd_kafka_resp_err_t err;

	rd_kafka_header_add(headers, "event_id", -1, ev->event_id, -1);
	for (int i = 0; i < ev->nheaders; i++)
		rd_kafka_header_add(headers, ev->header_names[i], -1, ev->header_values[i], -1);

	for (;;)
	{
		err = rd_kafka_producev(p->rk,
								RD_KAFKA_V_TOPIC(ev->topic),
								RD_KAFKA_V_KEY(ev->key, ev->key ? ev->key_len : 0),
								RD_KAFKA_V_VALUE(ev->payload, ev->payload ? ev->payload_len : 0),
								RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
								RD_KAFKA_V_HEADERS(headers),
								RD_KAFKA_V_TIMESTAMP(ev->created_at / 1000 + UNIX_EPOCH_OFFSET_MS),
								RD_KAFKA_V_OPAQUE((void *) (intptr_t) seq),
								RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		/* librdkafka's queue is full: let deliveries drain it */
		rd_kafka_poll(p->rk, POLL_SLICE_MS);
		CHECK_FOR_INTERRUPTS();
	}

	if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
		p->reports_pending++;
	else
	{
		rd_kafka_headers_destroy(headers);
		set_outcome(p, ev, err, false);
	}
}

/*
 * The state of a topic in p, entered (as not known) if it is new.
 */
static TopicState *
topic_state(OutboxProducer *p, const char *name)
{
	TopicState *topic;
	bool		found;

	if (p->known_topics == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = OUTBOX_TOPIC_SIZE;
		ctl.entrysize = sizeof(TopicState);
		p->known_topics = hash_create("outbox known topics", 64, &ctl,
									  HASH_ELEM | HASH_STRINGS);
	}
	topic = hash_search(p->known_topics, name, HASH_ENTER, &found);
	if (!found)
	{
		topic->known = false;
		topic->lookup = 0;
		topic->refusal = RD_KAFKA_RESP_ERR_NO_ERROR;
	}
	return topic;
}

/*
 * Start looking up the topics to learn of p's part of the batch: a handle
 * made for a topic that librdkafka has not seen has it ask for that
 * topic's metadata at once, the requests of all handles in flight
 * together; learn_topics() takes the answer.
 */
static void
begin_learning(OutboxProducer *p)
{
	p->learn_handles = palloc(sizeof(rd_kafka_topic_t *) * p->nlearn);
	for (int i = 0; i < p->nlearn; i++)
	{
		p->to_learn[i]->refusal = RD_KAFKA_RESP_ERR_NO_ERROR;
		p->learn_handles[i] = rd_kafka_topic_new(p->rk, p->to_learn[i]->name, NULL);
	}
	p->learn_started_at = GetCurrentTimestamp();
	p->learn_deadline = TimestampTzPlusMilliseconds(p->learn_started_at,
													Min(METADATA_TIMEOUT_MS,
														outbox_delivery_timeout));
}

/*
 * Stop looking up p's topics to learn, or give it up: their handles go
 * (their memory goes with the batch's).
 */
static void
end_learning(OutboxProducer *p)
{
	for (int i = 0; p->learn_handles != NULL && i < p->nlearn; i++)
	{
		if (p->learn_handles[i] != NULL)
			rd_kafka_topic_destroy(p->learn_handles[i]);
	}
	p->learn_handles = NULL;
	p->nlearn = 0;
}

/*
 * Ask p's cluster for the metadata of every topic p has a handle of, its
 * topics to learn among them, waiting for the answer at most timeout_ms.
 * Returns whether the lookup is over: answered, or past its deadline
 * (METADATA_TIMEOUT_MS, or delivery_timeout if shorter), a topic left
 * without an answer being produced to as it is, librdkafka looking it up
 * itself.  Each call asks again, so a short one misses a slower answer.
 */
static bool
learn_topics(OutboxProducer *p, int timeout_ms)
{
	const struct rd_kafka_metadata *metadata;

	if (rd_kafka_metadata(p->rk, 0, NULL, &metadata, timeout_ms) !=
		RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		if (GetCurrentTimestamp() < p->learn_deadline)
			return false;
		end_learning(p);
		return true;
	}
	for (int i = 0; i < metadata->topic_cnt; i++)
	{
		const rd_kafka_metadata_topic_t *answer = &metadata->topics[i];
		TopicState *topic = NULL;

		if (strlen(answer->topic) < OUTBOX_TOPIC_SIZE)
			topic = hash_search(p->known_topics, answer->topic, HASH_FIND, NULL);
		if (topic == NULL || topic->lookup != p->batch_first_seq)
			continue;
		topic->known = answer->err == RD_KAFKA_RESP_ERR_NO_ERROR;
		if (topic_refused(answer->err))
			topic->refusal = answer->err;
	}
	rd_kafka_metadata_destroy(metadata);
	note_answer(p, p->learn_started_at);
	end_learning(p);
	return true;
}

/*
 * Keys that stopped, hashed with their topic.  Two keys that collide only
 * hold each other back until the next transaction.
 */
static uint64
key_hash(const OutboxEvent *ev)
{
	uint64		h = hash_bytes_extended((const unsigned char *) ev->topic,
										strlen(ev->topic), 0);

	return hash_bytes_extended((const unsigned char *) ev->key, ev->key_len, h);
}

/*
 * An empty set of stopped keys, in the current memory context, for the
 * batches of one transaction.
 */
HTAB *
outbox_kafka_stopped_keys(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(uint64);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create("outbox stopped keys", 64, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * Has the key of ev stopped?  With stop, make it so.  An
 * event without key never stops anything, nor one whose topic could not
 * be read (refused when it was claimed, as every event of its key is).
 */
static bool
key_stopped(HTAB *stopped_keys, const OutboxEvent *ev, bool stop)
{
	uint64		hash;
	bool		found = false;

	if (ev->key == NULL || ev->topic == NULL)
		return false;
	hash = key_hash(ev);
	hash_search(stopped_keys, &hash, stop ? HASH_ENTER : HASH_FIND, &found);
	return found;
}

/*
 * The end of the wave that starts at order[first], within order[..last):
 * as many events as fit in one request to each partition, whatever
 * partitions they go to.
 */
static int
wave_end(OutboxProducer *p, OutboxBatch *batch, const int *order, int first,
		 int last)
{
	int64		bytes = 0;
	int			i;

	for (i = first; i < last; i++)
	{
		bytes += outbox_record_bytes(&batch->events[order[i]]) + RECORD_OVERHEAD_BYTES;
		if (bytes > p->built_max_message_bytes && i > first)
			break;
	}
	return i;
}

/*
 * Produce the events order[first..end) of a batch, but none of a key that
 * stopped: those are released untouched.  An event of a topic the cluster
 * refuses is refused without being produced.  A key stops at an event that
 * was not delivered, so that no later event of it overtakes that one.
 */
static void
produce_wave(OutboxProducer *p, OutboxBatch *batch, const int *order,
			 int first, int end, TopicState **topic_of, HTAB *stopped_keys)
{
	for (int j = first; j < end; j++)
	{
		int			i = order[j];
		OutboxEvent *ev = &batch->events[i];

		if (key_stopped(stopped_keys, ev, false))
		{
			if (ev->outcome == OUTBOX_IN_FLIGHT)
				ev->outcome = OUTBOX_RELEASED;
			continue;
		}
			/* not in flight: refused already when it was claimed */
		if (ev->outcome == OUTBOX_IN_FLIGHT)
		{
			if (topic_of[i]->refusal != RD_KAFKA_RESP_ERR_NO_ERROR)
				set_outcome(p, ev, topic_of[i]->refusal, false);
			else
				produce_event(p, ev, p->batch_first_seq + i);
		}
		/* refused at once, or when it was claimed */
		if (ev->outcome != OUTBOX_IN_FLIGHT)
			(void) key_stopped(stopped_keys, ev, true);
	}
}

/*
 * Stop the keys of the events order[first..end) that were not delivered,
 * so that no later event of theirs overtakes them.
 */
static void
stop_undelivered(OutboxBatch *batch, const int *order, int first, int end,
				 HTAB *stopped_keys)
{
	for (int j = first; j < end; j++)
	{
		if (batch->events[order[j]].outcome != OUTBOX_DELIVERED)
			(void) key_stopped(stopped_keys, &batch->events[order[j]], true);
	}
}

/* Has p a part of the batch in flight that is not done? */
static bool
part_active(const OutboxProducer *p)
{
	return p->current_batch != NULL && !p->part_done;
}

/*
 * Move p's part of the batch on as far as it goes without waiting for a
 * report: once the wave in flight has all its reports, stop the keys it
 * did not deliver; when the topics to learn come next, look them up,
 * waiting at most metadata_ms for the answer (0: not now); then produce
 * the next wave, whole, for the next flush to send in one request per
 * partition.  A part cut short ends once its wave in flight is purged.
 */
static void
advance_part(OutboxProducer *p, int metadata_ms)
{
	OutboxBatch *batch = p->current_batch;
	int		   *order = p->current_order;

	while (!p->part_done && p->reports_pending == 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (p->wave_end > p->wave_first)
		{
			stop_undelivered(batch, order, p->wave_first, p->wave_end,
							 p->current_stopped_keys);
			if (p->wave_sent_at != 0 && !p->cut_short)
				note_answer(p, p->wave_sent_at);
			p->wave_first = p->wave_end;
			p->progress_at = now;
		}
		if (p->cut_short || p->wave_first == p->nevents)
		{
			p->part_done = true;
			return;
		}
		if (p->wave_first == p->nknown && p->nlearn > 0)
		{
			if (p->learn_handles == NULL)
				begin_learning(p);
			if (metadata_ms <= 0 || !learn_topics(p, metadata_ms))
				return;
			p->progress_at = now = GetCurrentTimestamp();
		}
		p->wave_end = wave_end(p, batch, order, p->wave_first,
							   p->wave_first < p->nknown ? p->nknown : p->nevents);
		produce_wave(p, batch, order, p->wave_first, p->wave_end,
					 p->current_topics, p->current_stopped_keys);
		p->wave_sent_at = p->reports_pending > 0 ? now : 0;
		p->wave_deadline = TimestampTzPlusMilliseconds(now,
													   (int64) outbox_delivery_timeout +
													   DEADLINE_SLACK_MS);
	}
}

/*
 * Start publishing the events of a batch that go to p (producer_of[i] is
 * the producer of event i), in waves; outbox_kafka_finish() serves them
 * until every producer's part is done.  Nothing here waits for the
 * cluster.  librdkafka holds a partition's messages back (linger.ms)
 * until the flush, and a wave fits in one request per partition, so the
 * events of a key in a wave are one record batch that the broker takes or
 * refuses as a whole; a refused request is never followed by a later one
 * of the same key, because that key sends nothing more in this batch, nor
 * in the batches published after it with the same stopped_keys: the keys
 * that stopped, carried from one batch to the next of a transaction.
 *
 * The events of topics whose metadata is known go first; the topics met
 * for the first time, or looked up again after an error, are looked up
 * all at once, and their events follow.  A key belongs to one topic, so
 * this keeps the order of every key, and a new topic costs the known ones
 * nothing.  Events of a topic that the cluster refuses fail at once,
 * holding back the later events of their key only.
 *
 * One batch is published at a time: the next starts after this one is
 * finished by every producer it went to.
 */
void
outbox_kafka_start(OutboxProducer *p, OutboxBatch *batch,
				   OutboxProducer *const *producer_of, HTAB *stopped_keys)
{
	TopicState **topic_of = palloc(sizeof(TopicState *) * batch->count);
	int		   *order = palloc(sizeof(int) * batch->count);
	int			nevents = 0;

	Assert(p->current_batch == NULL);
	if (p->rk == NULL)			/* its events were released: see properties_file_usable */
		return;
	p->current_batch = batch;
	p->current_order = order;
	p->current_topics = topic_of;
	p->current_stopped_keys = stopped_keys;
	p->to_learn = palloc(sizeof(TopicState *) * batch->count);
	p->nlearn = 0;
	p->learn_handles = NULL;
	p->batch_first_seq = p->next_seq;
	p->next_seq += batch->count;
	p->reports_pending = 0;
	p->wave_first = p->wave_end = 0;
	p->progress_at = GetCurrentTimestamp();
	p->part_done = p->cut_short = false;

	/*
	 * The events of known topics first, in batch order, then the others.
	 * One refused when it was claimed goes first too; its topic may not
	 * even be readable.
	 */
	for (int i = 0; i < batch->count; i++)
	{
		topic_of[i] = NULL;
		if (producer_of[i] != p)
			continue;
		if (batch->events[i].outcome == OUTBOX_IN_FLIGHT)
			topic_of[i] = topic_state(p, batch->events[i].topic);
		if (topic_of[i] == NULL || topic_of[i]->known)
			order[nevents++] = i;
	}
	p->nknown = nevents;
	for (int i = 0; i < batch->count; i++)
	{
		if (topic_of[i] == NULL || topic_of[i]->known)
			continue;
		order[nevents++] = i;
		if (topic_of[i]->lookup != p->batch_first_seq)
		{
			topic_of[i]->lookup = p->batch_first_seq;
			p->to_learn[p->nlearn++] = topic_of[i];
		}
	}
	p->nevents = nevents;
	advance_part(p, 0);
}

/*
 * Cut p's part of the batch short: purge what it has in flight (counting
 * as timed out if timeout), and produce nothing more of it; the events
 * not produced stay without outcome, released.
 */
static void
cut_part(OutboxProducer *p, bool timeout)
{
	p->cut_short = true;
	end_learning(p);
	if (p->reports_pending > 0)
	{
		p->purge_is_timeout = timeout;
		rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	}
}

/*
 * Hand off p's part of the batch: its cluster is slow to answer while
 * other clusters' events wait.  The events of the wave in flight are
 * handed off: librdkafka keeps them, and p what their late reports need;
 * the worker records them as due again after delivery_timeout and more
 * (so that nothing is lost if the worker stops), and a later transaction
 * records what their reports say (outbox_kafka_late_reports()).  The
 * events not produced yet are released, and every key left undelivered
 * stops.  Topics still being looked up are produced to as they are
 * first: a cluster that never answers has its events charged by their own
 * delivery timeout, never spun on.
 */
static void
hand_off(OutboxProducer *p)
{
	OutboxBatch *batch = p->current_batch;
	int		   *order = p->current_order;
	TimestampTz due;
	MemoryContext old;
	int			n = p->nhanded_off;

	if (p->reports_pending == 0 && p->nlearn > 0)
	{
		end_learning(p);
		advance_part(p, 0);
		if (p->part_done)
			return;
	}
	due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									  (int64) outbox_delivery_timeout + DEADLINE_SLACK_MS);
	if (p->handoff_cxt == NULL)
		p->handoff_cxt = AllocSetContextCreate(producer_cxt, "outbox events handed off",
											   ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(p->handoff_cxt);
	if (n == 0)
		p->handed_off = palloc(sizeof(HandedOff) * (p->reports_pending + 1));
	else
		p->handed_off = repalloc(p->handed_off,
								 sizeof(HandedOff) * (n + p->reports_pending + 1));
	for (int j = p->wave_first; j < p->wave_end; j++)
	{
		OutboxEvent *ev = &batch->events[order[j]];
		HandedOff  *h;

		if (ev->outcome != OUTBOX_IN_FLIGHT)
			continue;
		h = &p->handed_off[n++];
		memset(h, 0, sizeof(HandedOff));
		h->seq = p->batch_first_seq + order[j];
		h->sent_at = p->wave_sent_at;
		h->ev.id = ev->id;
		h->ev.topic = pstrdup(ev->topic);
		h->ev.created_at = ev->created_at;
		h->ev.outcome = OUTBOX_IN_FLIGHT;
		h->ev.due_at = due;
		ev->outcome = OUTBOX_HANDED_OFF;
		ev->due_at = due;
	}
	MemoryContextSwitchTo(old);
	qsort(p->handed_off, n, sizeof(HandedOff), handed_off_cmp);
	p->nhanded_off = n;
	p->handoff_pending += p->reports_pending;
	p->reports_pending = 0;

	for (int j = p->wave_first; j < p->nevents; j++)
	{
		if (batch->events[order[j]].outcome == OUTBOX_IN_FLIGHT)
			batch->events[order[j]].outcome = OUTBOX_RELEASED;
	}
	stop_undelivered(batch, order, p->wave_first, p->nevents, p->current_stopped_keys);
	p->part_done = true;
}

/*
 * How long a lookup of p's topics may wait for its answer now: with
 * several clusters, not so long that another part of the batch goes
 * unserved, nor past p's hand-off.
 */
static int
metadata_wait(const OutboxProducer *p, bool several)
{
	ListCell   *lc;
	long		left;

	if (!several)
		return METADATA_SLICE_MS;
	foreach(lc, producers)
	{
		OutboxProducer *other = lfirst(lc);

		if (other != p && part_active(other))
			return METADATA_SHARED_SLICE_MS;
	}
	left = handoff_grace(p) -
		TimestampDifferenceMilliseconds(p->progress_at, GetCurrentTimestamp());
	return (int) Max(left, POLL_SLICE_MS);
}

/*
 * Serve p's part of the batch for a slice: flush what it produced (a
 * flush sends at once, ignoring linger.ms, and serves the callbacks) or
 * serve its errors, then move it on.
 */
static void
serve_part(OutboxProducer *p, bool several)
{
	if (p->reports_pending > 0)
		rd_kafka_flush(p->rk, POLL_SLICE_MS);
	else
		rd_kafka_poll(p->rk, 0);
	advance_part(p, metadata_wait(p, several));
}

/*
 * Cut p's part of the batch short, or hand it off, if its time is up:
 * SIGTERM's grace is over, a fatal error, every broker down (at once when
 * other clusters are named, else after OUTAGE_GRACE_MS), the wave's
 * deadline (librdkafka times messages out itself, but not always: a topic
 * in error state keeps them queued until its next metadata refresh);
 * with several clusters, no progress for its hand-off grace; with one,
 * while the worker is asked for its slot, none for YIELD_GRACE_MS.
 */
static void
check_part(OutboxProducer *p, bool several, TimestampTz now,
		   TimestampTz shutdown_deadline)
{
	if (!part_active(p) || p->cut_short)
		return;
	if ((shutdown_deadline != 0 && now >= shutdown_deadline) ||
		(p->brokers_down &&
		 (several ||
		  TimestampDifferenceExceeds(p->brokers_down_since, now, OUTAGE_GRACE_MS))) ||
		rd_kafka_fatal_error(p->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR)
		cut_part(p, false);
	else if (p->reports_pending > 0 && now >= p->wave_deadline)
		cut_part(p, true);
	else if (several &&
			 TimestampDifferenceExceeds(p->progress_at, now, (int) handoff_grace(p)))
		hand_off(p);
	else if (!several && TimestampDifferenceExceeds(p->progress_at, now, YIELD_GRACE_MS) &&
			 outbox_kafka_yield_requested != NULL && outbox_kafka_yield_requested())
		hand_off(p);
}

/*
 * End p's part of the batch: a topic whose event was refused is looked up
 * again before its next events (librdkafka may keep it in an error state
 * until its own next metadata refresh, minutes away, and the cluster may
 * have been mended), and a fatal producer error closes the producer, to
 * be rebuilt before the next transaction.  Returns false if the part was
 * cut short.
 */
static bool
finish_part(OutboxProducer *p)
{
	OutboxBatch *batch = p->current_batch;
	char		errbuf[512];

	end_learning(p);
	for (int i = 0; i < batch->count; i++)
	{
		if (p->current_topics[i] != NULL && batch->events[i].outcome == OUTBOX_REFUSED)
			p->current_topics[i]->known = false;
	}
	p->current_batch = NULL;
	p->purge_is_timeout = false;
	if (rd_kafka_fatal_error(p->rk, errbuf, sizeof(errbuf)) != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		ereport(LOG,
				(errmsg("fatal Kafka producer error, rebuilding the producer"),
				 errdetail("%s", errbuf),
				 errcontext("Kafka cluster %s", cluster_name(p))));
		close_producer(p);
		p->cut_short = true;
	}
	return !p->cut_short;
}

/*
 * Serve the batch being published until every producer's part of it is
 * done, all at once, in short slices with interrupt checks between them:
 * no cluster waits for another.  With several clusters, a part that makes
 * no progress for its grace is handed off (hand_off), so that a
 * cluster that hangs holds its own events only.  Returns false if a part
 * was cut short (outage, SIGTERM, deadline, a fatal error): its events
 * without a report are released, and nothing more is to be started.
 */
bool
outbox_kafka_finish(void)
{
	bool		several = list_length(producers) > 1;
	TimestampTz shutdown_deadline = 0;
	bool		complete = true;
	ListCell   *lc;

	for (;;)
	{
		TimestampTz now;
		bool		active = false;

		foreach(lc, producers)
		{
			if (part_active(lfirst(lc)))
				serve_part(lfirst(lc), several);
		}
		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
		if (ShutdownRequestPending && shutdown_deadline == 0)
			shutdown_deadline = TimestampTzPlusMilliseconds(now, SHUTDOWN_GRACE_MS);
		foreach(lc, producers)
		{
			check_part(lfirst(lc), several, now, shutdown_deadline);
			active |= part_active(lfirst(lc));
		}
		if (!active)
			break;
	}
	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);

		if (p->current_batch != NULL)
			complete = finish_part(p) && complete;
	}
	return complete;
}

/*
 * Forget the batch whose transaction failed: purge whatever of it is
 * still queued, in every producer, and ignore its remaining reports.
 */
void
outbox_kafka_forget_batch(void)
{
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);

		if (p->rk != NULL && p->current_batch != NULL)
		{
			end_learning(p);
			rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
			rd_kafka_poll(p->rk, 0);
		}
		p->current_batch = NULL;
		p->learn_handles = NULL;
		p->nlearn = 0;
		p->reports_pending = 0;
		p->purge_is_timeout = false;
	}
}

/*
 * Purge what p still holds of the events it handed off once one of them
 * is past due without a report (librdkafka times messages out itself, but
 * not always); they count as timed out.  p has no part of a batch in
 * flight.
 */
static void
expire_handed_off(OutboxProducer *p)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		expired = false;

	for (int i = 0; i < p->nhanded_off && !expired; i++)
		expired = p->handed_off[i].ev.outcome == OUTBOX_IN_FLIGHT &&
			now >= p->handed_off[i].ev.due_at;
	if (!expired || p->rk == NULL)
		return;
	p->purge_is_timeout = true;
	rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_poll(p->rk, 0);
	p->purge_is_timeout = false;
}

/*
 * Is there something for outbox_kafka_late_reports() to take: a late
 * report that came, or an event handed off past due?
 */
bool
outbox_kafka_late_pending(void)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);

		for (int i = 0; i < p->nhanded_off; i++)
		{
			if (p->handed_off[i].ev.outcome != OUTBOX_IN_FLIGHT ||
				now >= p->handed_off[i].ev.due_at)
				return true;
		}
	}
	return false;
}

/*
 * Take what the late reports of events handed off said, from every
 * producer, as a batch of retry-table events (their hand-off copied them
 * there), each with the due_at its hand-off recorded, for
 * outbox_record_late(); those past due without a report are purged
 * first, as timed out.  An event released meanwhile (purged when its
 * producer closed, timed out while every broker was down) has nothing to
 * record: it is due again when its hand-off said.  Nothing may be in
 * flight.  The batch is allocated in the current memory context.
 */
OutboxBatch *
outbox_kafka_late_reports(void)
{
	OutboxBatch *late = palloc0(sizeof(OutboxBatch));
	int			room = 0;
	ListCell   *lc;

	foreach(lc, producers)
		room += ((OutboxProducer *) lfirst(lc))->nhanded_off;
	late->events = palloc(sizeof(OutboxEvent) * (room + 1));
	foreach(lc, producers)
	{
		OutboxProducer *p = lfirst(lc);
		int			kept = 0;

		if (p->nhanded_off == 0)
			continue;
		expire_handed_off(p);
		for (int i = 0; i < p->nhanded_off; i++)
		{
			HandedOff  *h = &p->handed_off[i];
			OutboxEvent *ev;

			if (h->ev.outcome == OUTBOX_IN_FLIGHT)
			{
				p->handed_off[kept++] = *h;
				continue;
			}
			if (h->ev.outcome == OUTBOX_RELEASED)
				continue;
			ev = &late->events[late->count++];
			*ev = h->ev;
			ev->topic = pstrdup(h->ev.topic);
			ev->values[LOG_TOPIC] = CStringGetTextDatum(ev->topic);
		}
		p->nhanded_off = kept;
		if (kept == 0)
			forget_handed_off(p);
	}
	return late;
}
