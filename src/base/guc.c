/*-------------------------------------------------------------------------
 *
 * guc.c
 *		The outbox.* settings but Kafka's properties (kafka/properties.c):
 *		definitions, defaults and check hooks.
 *
 * outbox.databases, outbox.max_workers and outbox.worker_idle_timeout are
 * the launcher's, and exist only where the library is preloaded; the
 * publishing settings are PGC_SUSET, and outbox.headers is for any
 * session.  A worker sees a reload between batches, and is started again
 * when the settings of its database or role change: docs/design.md, "The
 * hooks of every backend", says why.
 *
 * src/base/guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <limits.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/varlena.h"

#include "base/event.h"
#include "base/guc.h"

char	   *outbox_databases = NULL;
int			outbox_max_workers = 8;
int			outbox_worker_idle_timeout = 2000;
bool		outbox_enabled = true;
char	   *outbox_brokers = NULL;
int			outbox_max_message_bytes = 1000000;
int			outbox_batch_size = 1000;
int			outbox_poll_interval = 1000;
int			outbox_wake_delay = 3;
int			outbox_max_attempts = 10;
int			outbox_retry_base_delay = 1000;
int			outbox_retry_max_delay = 300000;
double		outbox_retry_jitter = 0.25;
int			outbox_delivery_timeout = 30000;
int			outbox_published_retention = 7 * 24 * 3600;
int			outbox_abandoned_retention = 30 * 24 * 3600;
char	   *outbox_dead_letter_topic = NULL;
char	   *outbox_headers = NULL;
char	   *outbox_standby_slots = NULL;

/* read by the view outbox_health only, through current_setting() */
static int	health_backlog_warning = 60;
static int	health_backlog_critical = 300;

/* outbox.headers as a Jsonb object, NULL while it is empty (see assign hook) */
Jsonb	   *outbox_transaction_headers = NULL;

/*
 * outbox.databases: "*" or a comma-separated list of database names.
 */
static bool
check_databases(char **newval, void **extra, GucSource source)
{
	char	   *names;
	List	   *list;

	if (*newval == NULL || strcmp(*newval, "*") == 0)
		return true;
	names = pstrdup(*newval);
	if (!SplitIdentifierString(names, ',', &list))
	{
		GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	return true;
}

/*
 * Refuse a bootstrap list that is empty: the worker could never connect.
 */
static bool
check_brokers(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[strspn(*newval, " \t")] == '\0')
	{
		GUC_check_errdetail("At least one broker must be given, as host:port.");
		return false;
	}
	return true;
}

/*
 * The dead-letter topic must be a valid topic name, or empty (none).
 */
static bool
check_dead_letter_topic(char **newval, void **extra, GucSource source)
{
	const char *problem;

	if (*newval == NULL || **newval == '\0')
		return true;
	problem = outbox_topic_problem(*newval, strlen(*newval));
	if (problem != NULL)
	{
		GUC_check_errdetail("%s", problem);
		return false;
	}
	return true;
}

/*
 * outbox.headers must be a JSON object of strings without "event_id", as
 * the headers argument of outbox_enqueue.  Parsed here, without raising
 * errors, into a Jsonb kept as the setting's extra: enqueue merges it with
 * no parsing of its own.
 */
static bool
check_headers(char **newval, void **extra, GucSource source)
{
	JsonLexContext *lex;
	JsonParseErrorType err;
	Jsonb	   *headers;
	OutboxEvent ev = {0};
	const char *problem;
	bool		not_utf8;

	if (*newval == NULL || (*newval)[strspn(*newval, " \t\n\r")] == '\0')
		return true;
	if (outbox_json_too_deep(*newval, 1))
	{
		GUC_check_errdetail("Kafka headers are given as a JSON object {\"name\": \"value\", ...}, with no object or array inside.");
		return false;
	}
	lex = makeJsonLexContextCstringLen(*newval, strlen(*newval),
									  GetDatabaseEncoding(), true);
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
	{
		GUC_check_errdetail("The value is not valid JSON: %s", json_errdetail(err, lex));
		return false;
	}
	headers = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(*newval)));
	problem = outbox_unpack_headers(headers, &ev, &not_utf8);
	if (problem != NULL)
	{
		GUC_check_errdetail("%s", problem);
		return false;
	}
	*extra = malloc(VARSIZE(headers));
	if (*extra == NULL)
		return false;
	memcpy(*extra, headers, VARSIZE(headers));
	return true;
}

static void
assign_headers(const char *newval, void *extra)
{
	Jsonb	   *headers = (Jsonb *) extra;

	outbox_transaction_headers =
		headers != NULL && JB_ROOT_COUNT(headers) > 0 ? headers : NULL;
}

/*
 * outbox.standby_slots: a comma-separated list of replication slot names,
 * taken as written (slot names are not identifiers: "Standby1" is no slot
 * name, and is not folded into one).  Whether each exists is checked when
 * the worker publishes, where a slot dropped later is caught too.
 */
static bool
check_standby_slots(char **newval, void **extra, GucSource source)
{
	char	   *names;
	List	   *slots;
	ListCell   *lc;

	if (*newval == NULL || **newval == '\0')
		return true;
	names = pstrdup(*newval);
	if (!SplitGUCList(names, ',', &slots))
	{
		GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	foreach(lc, slots)
	{
		const char *name = (const char *) lfirst(lc);

		if (strlen(name) >= NAMEDATALEN ||
			strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name))
		{
			GUC_check_errdetail("\"%s\" is not a replication slot name: slot names are lower case letters, digits and underscores.",
								name);
			return false;
		}
	}
	return true;
}

/*
 * The settings of the launcher: the databases served, the workers' slots.
 * Only the postmaster defines them: they exist only where the launcher
 * runs.
 */
static void
define_launcher_gucs(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomStringVariable("outbox.databases",
							   "Databases the outbox workers publish from: * for every one that has the extension, or a comma-separated list of names.",
							   NULL,
							   &outbox_databases,
							   "*",
							   PGC_SIGHUP,
							   0,
							   check_databases, NULL, NULL);

	DefineCustomIntVariable("outbox.max_workers",
							"Most publishing workers, one per database, that run at once.",
							NULL,
							&outbox_max_workers,
							8,
							1, 1024,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.worker_idle_timeout",
							"How long an idle worker keeps its slot while another database waits for one.",
							"A worker idle this long, with no event, retry or snapshot left, exits when a database waits for a worker; the next commit there starts it again.  A busy worker gives its slot after a time slice of 5 s, or this if longer, and waits for its turn.  -1: never, idle or not.",
							&outbox_worker_idle_timeout,
							2000,
							-1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/*
 * The settings of what the worker publishes, how and when: the cluster,
 * batches, the waits, the standbys, the headers of enqueue.
 */
static void
define_publishing_gucs(void)
{
	DefineCustomBoolVariable("outbox.enabled",
							 "Whether the worker publishes the events of a database.",
							 "Off keeps them waiting, nothing lost, until it is on again; set it per database with ALTER DATABASE.",
							 &outbox_enabled,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("outbox.brokers",
							   "Kafka bootstrap servers, as a comma-separated host:port list.",
							   NULL,
							   &outbox_brokers,
							   "localhost:9092",
							   PGC_SUSET,
							   0,
							   check_brokers, NULL, NULL);

	DefineCustomIntVariable("outbox.max_message_bytes",
							"Largest event outbox_enqueue accepts: payload, key and headers, in bytes.",
							NULL,
							&outbox_max_message_bytes,
							1000000,
							1, 1000000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.batch_size",
							"Most events the worker claims and produces at once.",
							NULL,
							&outbox_batch_size,
							1000,
							1, 100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.poll_interval",
							"Longest the idle worker sleeps before looking for due events.",
							"Commits that enqueue events wake the worker at once; this timer is a fallback and paces retries.",
							&outbox_poll_interval,
							1000,
							10, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.wake_delay",
							"The most the worker lets commits gather before it claims: after a commit woke it, and between the claims of batches that were not full.",
							"The commits of that while share one batch: less work per event for the worker, up to that much more latency. It waits only while commits come two in this time or faster.",
							&outbox_wake_delay,
							3,
							0, 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.delivery_timeout",
							"How long an event may stay in flight before the attempt counts as failed.",
							"Time during which no broker is reachable does not count.",
							&outbox_delivery_timeout,
							30000,
							100, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("outbox.standby_slots",
							   "Physical replication slots whose standbys must have an event's commit before it is published.",
							   "A comma-separated list; empty publishes without waiting for any standby.",
							   &outbox_standby_slots,
							   "",
							   PGC_SUSET,
							   0,
							   check_standby_slots, NULL, NULL);

	DefineCustomStringVariable("outbox.headers",
							   "Kafka headers of every event enqueued while it is set, as a JSON object of strings.",
							   "Meant for SET LOCAL in the application's transaction (a trace context, a tenant); a header given to outbox_enqueue wins over the one of the same name here.",
							   &outbox_headers,
							   "",
							   PGC_USERSET,
							   0,
							   check_headers, assign_headers, NULL);
}

/*
 * The settings of failed deliveries: attempts, their delays, the
 * dead-letter topic.
 */
static void
define_failure_gucs(void)
{
	DefineCustomIntVariable("outbox.max_attempts",
							"Delivery attempts after which an event is abandoned.",
							NULL,
							&outbox_max_attempts,
							10,
							1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.retry_base_delay",
							"Delay before the first retry; doubled after each further failure.",
							NULL,
							&outbox_retry_base_delay,
							1000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.retry_max_delay",
							"Longest delay between two attempts.",
							NULL,
							&outbox_retry_max_delay,
							300000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomRealVariable("outbox.retry_jitter",
							 "Fraction by which each retry delay is randomly spread up or down.",
							 NULL,
							 &outbox_retry_jitter,
							 0.25,
							 0.0, 1.0,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("outbox.dead_letter_topic",
							   "Topic that abandoned events are also published to; empty for none.",
							   NULL,
							   &outbox_dead_letter_topic,
							   "",
							   PGC_SUSET,
							   0,
							   check_dead_letter_topic, NULL, NULL);
}

/*
 * The settings of what is kept, and of what outbox_health calls late.
 */
static void
define_retention_gucs(void)
{
	DefineCustomIntVariable("outbox.published_retention",
							"How long published events are kept; 0 deletes them on delivery.",
							NULL,
							&outbox_published_retention,
							7 * 24 * 3600,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.abandoned_retention",
							"How long abandoned events are kept, counted from their creation.",
							NULL,
							&outbox_abandoned_retention,
							30 * 24 * 3600,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.health_backlog_warning",
							"Age of the oldest due event past which outbox_health says warning.",
							NULL,
							&health_backlog_warning,
							60,
							1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("outbox.health_backlog_critical",
							"Age of the oldest due event past which outbox_health says critical.",
							NULL,
							&health_backlog_critical,
							300,
							1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/*
 * Define the outbox.* settings, but for the Kafka properties
 * (src/kafka/properties.c).  Called from _PG_init in every process that
 * loads the library, before the prefix is reserved.
 */
void
outbox_define_gucs(void)
{
	define_launcher_gucs();
	define_publishing_gucs();
	define_failure_gucs();
	define_retention_gucs();
}
