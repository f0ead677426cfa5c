/*-------------------------------------------------------------------------
 *
 * properties.c
 *		The librdkafka properties that outbox allows: the allow-list, the
 *		settings outbox.kafka_properties and outbox.kafka_properties_file
 *		and their check hooks, and the reading of the properties file; the
 *		setting outbox.schema_registry_url, whose credentials the file
 *		holds.
 *
 * Only the librdkafka properties known to be safe are taken; a secret
 * among them is refused where the setting would be stored in a catalog
 * that every role can read.
 *
 * src/kafka/properties.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <librdkafka/rdkafka.h>

#include "access/xact.h"
#include "common/string.h"
#include "storage/fd.h"
#include "utils/guc.h"

#include "kafka/properties.h"

char	   *outbox_kafka_properties = NULL;
char	   *outbox_kafka_properties_file = NULL;
char	   *outbox_schema_registry_url = NULL;

/*
 * The librdkafka properties that outbox.kafka_properties and the properties
 * file may set, from librdkafka 2.0's CONFIGURATION.md.  It is an
 * allow-list: a property not listed is refused, so that one added by a
 * later librdkafka is refused until someone judges it.  Some are listed as
 * refused only to say why: they would run a command or load code in the
 * server, switch off what the guarantees depend on, or belong to another
 * outbox.* setting.  Aliases are listed too.
 *
 * A secret is allowed, but never from a setting stored in a catalog that
 * every role can read (check_kafka_properties).  values, when set, lists
 * what each item of the property's comma-separated value may be;
 * shell_safe values go into the command line of librdkafka's default kinit
 * command, and may hold no shell metacharacter.  reason says why a
 * property is refused, or why its values are limited.
 */
typedef enum PropertyKind
{
	PROPERTY_ALLOWED,
	PROPERTY_SECRET,
	PROPERTY_REFUSED
} PropertyKind;

typedef struct KafkaProperty
{
	const char *name;
	PropertyKind kind;
	const char *values;
	bool		shell_safe;
	const char *reason;
} KafkaProperty;

#define ALLOWED(name) {name, PROPERTY_ALLOWED, NULL, false, NULL}
#define SECRET(name) {name, PROPERTY_SECRET, NULL, false, NULL}
#define REFUSED(name, reason) {name, PROPERTY_REFUSED, NULL, false, reason}

#define RUNS_KINIT "librdkafka puts it in the shell command that runs kinit."
#define LOADS_CODE "It loads code (a library, an OpenSSL engine or provider) into the server's processes."
#define ONE_REQUEST "The worker sends each wave of a batch in one request per partition."
#define WHOLE_WAVE "The worker queues each wave of a batch whole before it sends it."

static const KafkaProperty kafka_property_list[] = {
	/* who the producer is, and how it authenticates */
	ALLOWED("client.id"),
	ALLOWED("security.protocol"),
	ALLOWED("sasl.mechanism"),
	ALLOWED("sasl.mechanisms"),
	ALLOWED("sasl.username"),
	SECRET("sasl.password"),
	ALLOWED("sasl.kerberos.service.name"),
	{"sasl.kerberos.principal", PROPERTY_ALLOWED, NULL, true, RUNS_KINIT},
	{"sasl.kerberos.keytab", PROPERTY_ALLOWED, NULL, true, RUNS_KINIT},
	ALLOWED("sasl.kerberos.min.time.before.relogin"),
	ALLOWED("sasl.oauthbearer.method"),
	ALLOWED("sasl.oauthbearer.client.id"),
	SECRET("sasl.oauthbearer.client.secret"),
	ALLOWED("sasl.oauthbearer.scope"),
	ALLOWED("sasl.oauthbearer.extensions"),
	ALLOWED("sasl.oauthbearer.token.endpoint.url"),
	SECRET("sasl.oauthbearer.config"),
	ALLOWED("enable.sasl.oauthbearer.unsecure.jwt"),
	ALLOWED("ssl.certificate.location"),
	ALLOWED("ssl.certificate.pem"),
	ALLOWED("ssl.key.location"),
	SECRET("ssl.key.password"),
	SECRET("ssl.key.pem"),
	ALLOWED("ssl.keystore.location"),
	SECRET("ssl.keystore.password"),
	ALLOWED("ssl.ca.location"),
	ALLOWED("ssl.ca.pem"),
	ALLOWED("ssl.crl.location"),
	ALLOWED("ssl.cipher.suites"),
	ALLOWED("ssl.curves.list"),
	ALLOWED("ssl.sigalgs.list"),
	ALLOWED("ssl.endpoint.identification.algorithm"),
	ALLOWED("enable.ssl.certificate.verification"),

	/* connections, timeouts, metadata */
	ALLOWED("broker.address.family"),
	ALLOWED("broker.address.ttl"),
	ALLOWED("socket.timeout.ms"),
	ALLOWED("socket.connection.setup.timeout.ms"),
	ALLOWED("socket.keepalive.enable"),
	ALLOWED("socket.nagle.disable"),
	ALLOWED("socket.send.buffer.bytes"),
	ALLOWED("socket.receive.buffer.bytes"),
	ALLOWED("connections.max.idle.ms"),
	ALLOWED("reconnect.backoff.ms"),
	ALLOWED("reconnect.backoff.max.ms"),
	ALLOWED("request.timeout.ms"),
	ALLOWED("retry.backoff.ms"),
	ALLOWED("api.version.request.timeout.ms"),
	ALLOWED("topic.metadata.refresh.interval.ms"),
	ALLOWED("topic.metadata.refresh.fast.interval.ms"),
	ALLOWED("topic.metadata.propagation.max.ms"),
	ALLOWED("metadata.max.age.ms"),

	/* records */
	ALLOWED("compression.type"),
	ALLOWED("compression.codec"),
	ALLOWED("compression.level"),
	{"partitioner", PROPERTY_ALLOWED,
		"murmur2_random,murmur2,consistent_random,consistent,fnv1a_random,fnv1a", false,
	"Order per key needs a partitioner that sends a key to one partition."},
	ALLOWED("sticky.partitioning.linger.ms"),

	/* librdkafka's logs, which go to the server log */
	ALLOWED("log_level"),
	ALLOWED("log.connection.close"),
	{"debug", PROPERTY_ALLOWED,
		"generic,broker,topic,metadata,feature,queue,msg,protocol,security,eos", false,
	"The other contexts are of no use to a producer, or can log the values of properties, secrets among them."},

	/* would run a command or load code in the server */
	REFUSED("sasl.kerberos.kinit.cmd", "It runs a shell command as the operating system user of the server."),
	REFUSED("plugin.library.paths", LOADS_CODE),
	REFUSED("ssl.engine.location", LOADS_CODE),
	REFUSED("ssl.engine.id", LOADS_CODE),
	REFUSED("ssl.providers", LOADS_CODE),
	REFUSED("internal.termination.signal", "The server's processes use their signals themselves."),

	/* would switch off what the guarantees depend on */
	REFUSED("enable.idempotence", "Order per key and one copy per retry depend on it."),
	REFUSED("acks", "Durability depends on it: the worker waits for every in-sync replica."),
	REFUSED("request.required.acks", "Durability depends on it: the worker waits for every in-sync replica."),
	REFUSED("message.send.max.retries", "The idempotent producer depends on librdkafka's retries."),
	REFUSED("retries", "The idempotent producer depends on librdkafka's retries."),
	REFUSED("queuing.strategy", "Order per key depends on it."),
	REFUSED("linger.ms", ONE_REQUEST),
	REFUSED("queue.buffering.max.ms", ONE_REQUEST),
	REFUSED("batch.num.messages", ONE_REQUEST),
	REFUSED("batch.size", ONE_REQUEST),
	REFUSED("queue.buffering.max.messages", WHOLE_WAVE),
	REFUSED("queue.buffering.max.kbytes", WHOLE_WAVE),
	REFUSED("delivery.report.only.error", "Each event's outcome comes from its delivery report."),
	REFUSED("log.queue", "librdkafka's threads must not call into the server."),
	REFUSED("statistics.interval.ms", "outbox_worker_status() depends on it."),

	/* belong to another setting */
	REFUSED("bootstrap.servers", "Set outbox.brokers instead."),
	REFUSED("metadata.broker.list", "Set outbox.brokers instead."),
	REFUSED("message.timeout.ms", "Set outbox.delivery_timeout instead."),
	REFUSED("delivery.timeout.ms", "Set outbox.delivery_timeout instead."),
	REFUSED("message.max.bytes", "Set outbox.max_message_bytes instead."),
};

/* the characters a shell_safe value may hold */
#define SHELL_SAFE_CHARS \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/@:+="

static const KafkaProperty *
find_property(const char *name)
{
	for (int i = 0; i < lengthof(kafka_property_list); i++)
	{
		if (strcmp(kafka_property_list[i].name, name) == 0)
			return &kafka_property_list[i];
	}
	return NULL;
}

/*
 * Is each comma-separated item of value one of the comma-separated list?
 */
static bool
value_in_list(const char *value, const char *list)
{
	char	   *items = pstrdup(value);
	char	   *saveptr = NULL;
	bool		ok = true;

	for (char *item = strtok_r(items, ",", &saveptr); item != NULL && ok;
		 item = strtok_r(NULL, ",", &saveptr))
	{
		const char *p = list;
		size_t		len;

		item += strspn(item, " ");
		len = strcspn(item, " ");
		ok = false;
		while (*p != '\0' && !ok)
		{
			size_t		n = strcspn(p, ",");

			ok = n == len && strncmp(p, item, len) == 0;
			p += n + (p[n] == ',');
		}
	}
	pfree(items);
	return ok;
}

/* what a file that is not a regular one is, for a message */
static const char *
kind_of_file(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a named pipe";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

/*
 * Why the file that a property names (a certificate, a key, a CA: a
 * *.location) cannot be given to librdkafka or libcurl, which open and read
 * it in this process: it exists and is neither a regular file nor a
 * directory.  A named pipe would keep the opener waiting for ever, a device
 * may never end.  NULL if it can be, or if it does not exist (the library
 * says so).
 */
const char *
outbox_kafka_path_problem(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
		return NULL;
	return psprintf("It names %s: only a regular file or a directory is read.",
					kind_of_file(st.st_mode));
}

/*
 * Judge one property and set it on conf (a scratch one when only
 * checking): is it allowed, here, and does librdkafka take its value?
 * where names the setting or the file and line, for the message.  No
 * message shows the value: it may be a secret.
 */
static bool
set_property(rd_kafka_conf_t *conf, const char *name, const char *value,
			 bool secrets_allowed, const char *where,
			 OutboxPropertyError *error)
{
	const KafkaProperty *property = find_property(name);
	const char *problem;
	char		errbuf[512];

	memset(error, 0, sizeof(*error));
	if (property == NULL || property->kind == PROPERTY_REFUSED)
	{
		snprintf(error->message, sizeof(error->message),
				 "Kafka property \"%s\" is not allowed in %s", name, where);
		if (property != NULL)
			strlcpy(error->detail, property->reason, sizeof(error->detail));
		else
		{
			strlcpy(error->detail,
					"It is not one of the librdkafka producer properties that outbox allows.",
					sizeof(error->detail));
			error->hint = "The properties allowed are listed in docs/kafka-properties.md of outbox.";
		}
		return false;
	}
	if (property->kind == PROPERTY_SECRET && !secrets_allowed)
	{
		snprintf(error->message, sizeof(error->message),
				 "Kafka property \"%s\" cannot be set per database, per role or per function",
				 name);
		strlcpy(error->detail,
				"It is a secret, and such settings are stored in catalogs that every role can read.",
				sizeof(error->detail));
		error->hint = "Set it in postgresql.conf, or in the file that outbox.kafka_properties_file names, which can be set per database.";
		return false;
	}

	snprintf(error->message, sizeof(error->message),
			 "invalid value for Kafka property \"%s\" in %s", name, where);
	if (property->values != NULL && !value_in_list(value, property->values))
	{
		snprintf(error->detail, sizeof(error->detail), "Allowed values: %s. %s",
				 property->values, property->reason);
		return false;
	}
	if (property->shell_safe && strspn(value, SHELL_SAFE_CHARS) != strlen(value))
	{
		snprintf(error->detail, sizeof(error->detail),
				 "It may hold only letters, digits and the characters \"%s\". %s",
				 "._-/@:+=", property->reason);
		return false;
	}
	if (pg_str_endswith(name, ".location") && (problem = outbox_kafka_path_problem(value)) != NULL)
	{
		strlcpy(error->detail, problem, sizeof(error->detail));
		return false;
	}
	if (rd_kafka_conf_set(conf, name, value, errbuf, sizeof(errbuf)) != RD_KAFKA_CONF_OK)
	{
		/* librdkafka's message, unless it shows the value */
		if (*value != '\0' && strstr(errbuf, value) != NULL)
			strlcpy(error->detail, "librdkafka does not accept the value given.",
					sizeof(error->detail));
		else
			snprintf(error->detail, sizeof(error->detail), "%s.", errbuf);
		error->hint = "librdkafka's CONFIGURATION.md lists the values each property takes.";
		return false;
	}
	error->message[0] = '\0';
	return true;
}

/*
 * Trim the white space around s, in place.
 */
static char *
trim(char *s)
{
	char	   *end;

	s += strspn(s, " \t\r\n");
	end = s + strlen(s);
	while (end > s && strchr(" \t\r\n", end[-1]) != NULL)
		*--end = '\0';
	return s;
}

/*
 * Split "name = value" at its first '='; false if it has none or no name.
 */
static bool
split_property(char *item, char **name, char **value)
{
	char	   *eq = strchr(item, '=');

	if (eq == NULL)
		return false;
	*eq = '\0';
	*name = trim(item);
	*value = trim(eq + 1);
	return **name != '\0';
}

/*
 * Set each name=value pair of a ';'-separated list (outbox.kafka_properties)
 * on conf.  On failure, returns false with the reason in *error.
 */
bool
outbox_kafka_apply_property_list(rd_kafka_conf_t *conf, const char *properties,
					bool secrets_allowed, OutboxPropertyError *error)
{
	char	   *list = pstrdup(properties);
	char	   *saveptr = NULL;
	int			itemno = 0;

	for (char *item = strtok_r(list, ";", &saveptr); item != NULL;
		 item = strtok_r(NULL, ";", &saveptr))
	{
		char	   *name;
		char	   *value;

		if (*trim(item) == '\0')
			continue;
		itemno++;
		if (!split_property(item, &name, &value))
		{
			memset(error, 0, sizeof(*error));
			strlcpy(error->message,
					"invalid Kafka property in outbox.kafka_properties",
					sizeof(error->message));
			snprintf(error->detail, sizeof(error->detail),
					 "Item %d of the list is not of the form name=value.", itemno);
			return false;
		}
		if (!set_property(conf, name, value, secrets_allowed,
						  "outbox.kafka_properties", error))
			return false;
	}
	pfree(list);
	return true;
}

/*
 * Check outbox.kafka_properties: would every property be taken?  Secrets
 * only if secrets_allowed.  For the check hook.
 */
bool
outbox_kafka_check_properties(const char *properties, bool secrets_allowed,
							  OutboxPropertyError *error)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	bool		ok = outbox_kafka_apply_property_list(conf, properties, secrets_allowed, error);

	rd_kafka_conf_destroy(conf);
	return ok;
}

/* what identifies the contents of a file, from its stat */
static void
file_version_of(const struct stat *st, OutboxFileVersion *version)
{
	memset(version, 0, sizeof(*version));
	version->exists = true;
	version->dev = st->st_dev;
	version->ino = st->st_ino;
	version->size = st->st_size;
	version->mtime = st->st_mtim;
	version->ctime = st->st_ctim;
}

/* the largest properties file read: lines of properties, PEM included */
#define MAX_FILE_BYTES (1024 * 1024)

/*
 * Read the properties file at path, which a setting names, into *lines,
 * one string per line, without blocking: it must be a regular file that
 * other users cannot read (it may hold secrets), of at most
 * MAX_FILE_BYTES.  A named pipe is opened without waiting for a writer and
 * refused, as is a device (/dev/zero, endless) or a directory; a symbolic
 * link is followed, and what it points at judged.  *version gets what
 * identifies the contents read.  On failure, returns false with the reason
 * in *error, naming the file; error->missing if it does not exist.
 */
bool
outbox_kafka_read_file(const char *path, List **lines, OutboxFileVersion *version,
					   OutboxPropertyError *error)
{
	struct stat st;
	StringInfoData contents;
	int			fd;
	ssize_t		n = 0;
	char	   *end;

	memset(error, 0, sizeof(*error));
	memset(version, 0, sizeof(*version));
	*lines = NIL;
	fd = OpenTransientFile(path, O_RDONLY | O_NONBLOCK | PG_BINARY);
	if (fd < 0)
	{
		int			save_errno = errno;

		error->missing = save_errno == ENOENT;
		errno = save_errno;
		snprintf(error->message, sizeof(error->message),
				 "could not open Kafka properties file \"%s\": %m", path);
		return false;
	}
	if (fstat(fd, &st) != 0)
	{
		snprintf(error->message, sizeof(error->message),
				 "could not stat Kafka properties file \"%s\": %m", path);
		CloseTransientFile(fd);
		return false;
	}
	file_version_of(&st, version);
	if (!S_ISREG(st.st_mode))
	{
		snprintf(error->message, sizeof(error->message),
				 "Kafka properties file \"%s\" is not a regular file", path);
		snprintf(error->detail, sizeof(error->detail),
				 "It is %s: only a regular file is read, which cannot keep the reader waiting.",
				 kind_of_file(st.st_mode));
		CloseTransientFile(fd);
		return false;
	}
	if ((st.st_mode & S_IRWXO) != 0)
	{
		snprintf(error->message, sizeof(error->message),
				 "Kafka properties file \"%s\" is accessible by other users", path);
		strlcpy(error->detail,
				"It may hold secrets: its permissions must give other users no access.",
				sizeof(error->detail));
		error->hint = "Remove their access, for example with chmod o-rwx.";
		CloseTransientFile(fd);
		return false;
	}

	/* read one byte past the bound, to know a file that grew past it */
	initStringInfo(&contents);
	enlargeStringInfo(&contents, Min(st.st_size, MAX_FILE_BYTES) + 1);
	while (contents.len <= MAX_FILE_BYTES)
	{
		if (contents.maxlen - contents.len < 2)
			enlargeStringInfo(&contents, 8192);
		n = read(fd, contents.data + contents.len,
				 Min(contents.maxlen - contents.len - 1, MAX_FILE_BYTES + 1 - contents.len));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		contents.len += n;
	}
	if (n < 0)
		snprintf(error->message, sizeof(error->message),
				 "could not read Kafka properties file \"%s\": %m", path);
	CloseTransientFile(fd);
	if (n < 0)
		return false;
	if (contents.len > MAX_FILE_BYTES)
	{
		snprintf(error->message, sizeof(error->message),
				 "Kafka properties file \"%s\" is too large", path);
		snprintf(error->detail, sizeof(error->detail),
				 "A properties file has at most %d bytes.", MAX_FILE_BYTES);
		return false;
	}
	contents.data[contents.len] = '\0';

	/* lines end at a newline; a line that holds a NUL byte ends there */
	end = contents.data + contents.len;
	for (char *line = contents.data; line < end;)
	{
		char	   *newline = memchr(line, '\n', end - line);

		if (newline != NULL)
			*newline = '\0';
		*lines = lappend(*lines, line);
		line = newline != NULL ? newline + 1 : end;
	}
	return true;
}

/*
 * Set the properties of the file at path on conf: one name=value per line,
 * lines that start with # are comments, schema.registry.* properties are
 * the schema registry client's (src/kafka/registry.c).  The file is read
 * by outbox_kafka_read_file, with its checks.  *version gets what
 * identifies the contents read.  On failure, returns false with the
 * reason in *error, naming the file and line.
 */
bool
outbox_kafka_apply_property_file(rd_kafka_conf_t *conf, const char *path,
					OutboxFileVersion *version, OutboxPropertyError *error)
{
	List	   *lines;
	ListCell   *lc;

	if (!outbox_kafka_read_file(path, &lines, version, error))
		return false;
	foreach(lc, lines)
	{
		char	   *text = trim(lfirst(lc));
		char	   *name;
		char	   *value;
		char		where[MAXPGPATH + 32];

		if (*text == '\0' || *text == '#')
			continue;
		snprintf(where, sizeof(where), "file \"%s\", line %d", path,
				 foreach_current_index(lc) + 1);
		if (!split_property(text, &name, &value))
		{
			snprintf(error->message, sizeof(error->message),
					 "invalid Kafka property in %s", where);
			strlcpy(error->detail, "The line is not of the form name=value.",
					sizeof(error->detail));
			return false;
		}
		if (strncmp(name, "schema.registry.", 16) != 0 &&	/* registry.c's */
			!set_property(conf, name, value, true, where, error))
			return false;
	}
	return true;
}

/*
 * Check the file that outbox.kafka_properties_file names: would every
 * property in it be taken?  For the check hook and for a file changed
 * under a running producer.
 */
bool
outbox_kafka_check_properties_file(const char *path, OutboxPropertyError *error)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	OutboxFileVersion version;
	bool		ok = outbox_kafka_apply_property_file(conf, path, &version, error);

	rd_kafka_conf_destroy(conf);
	return ok;
}

/* the same file, unchanged (or both missing)? */
bool
outbox_kafka_same_file_version(const OutboxFileVersion *a, const OutboxFileVersion *b)
{
	return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino &&
		a->size == b->size &&
		a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
		a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* The version of the file at path now; none for no path, without a stat. */
void
outbox_kafka_file_version(const char *path, OutboxFileVersion *version)
{
	struct stat st;

	memset(version, 0, sizeof(*version));
	if (*path != '\0' && stat(path, &st) == 0)
		file_version_of(&st, version);
}

/*
 * Is a setting from this source stored in a catalog that every role can
 * read?  ALTER DATABASE/ROLE ... SET keep it in pg_db_role_setting, a
 * function's SET clause in pg_proc.proconfig: PGC_S_TEST is how those
 * statements check a value before they store it, the others how a stored
 * value is applied when a session (or a worker) starts.
 */
static bool
source_is_catalog(GucSource source)
{
	switch (source)
	{
		case PGC_S_GLOBAL:
		case PGC_S_DATABASE:
		case PGC_S_USER:
		case PGC_S_DATABASE_USER:
		case PGC_S_TEST:
			return true;
		default:
			return false;
	}
}

/*
 * Report refused Kafka properties from a check hook.  A statement that
 * would store the setting (source PGC_S_TEST) fails with the error raised
 * here rather than the GUC machinery's: the same ERROR, but without the
 * statement in the server log, for the statement holds the values, maybe
 * a secret.  (The copy of the value the GUC machinery made for the hook is
 * left behind; a statement that fails costs that much.)  Elsewhere the
 * hook returns false, with the message set here in place of the usual one,
 * which would show the value.
 */
static void
report_property_error(const OutboxPropertyError *error, GucSource source)
{
	if (source == PGC_S_TEST)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_internal("%s", error->message),
				 error->detail[0] ? errdetail_internal("%s", error->detail) : 0,
				 error->hint ? errhint("%s", error->hint) : 0,
				 errhidestmt(true)));
	GUC_check_errmsg("%s", error->message);
	if (error->detail[0])
		GUC_check_errdetail("%s", error->detail);
	if (error->hint)
		GUC_check_errhint("%s", error->hint);
}

/*
 * Judge each name=value pair, so that a property outbox does not allow, or
 * a value librdkafka does not take, is refused when the setting is made
 * rather than when the worker next builds a producer.  Secrets are refused
 * from a catalog (source_is_catalog).
 */
static bool
check_kafka_properties(char **newval, void **extra, GucSource source)
{
	OutboxPropertyError error;

	if (*newval == NULL ||
		outbox_kafka_check_properties(*newval, !source_is_catalog(source), &error))
		return true;
	report_property_error(&error, source);
	return false;
}

/*
 * Is a setting from this source being set by a statement (ALTER SYSTEM,
 * ALTER DATABASE or ROLE ... SET, SET; pg_file_settings too), rather than
 * applied, at server start, in every session and at every reload
 * (PGC_S_FILE outside a transaction is postgresql.conf read)?
 */
static bool
set_by_statement(GucSource source)
{
	return source == PGC_S_TEST || source == PGC_S_SESSION ||
		(source == PGC_S_FILE && IsTransactionState());
}

/*
 * Would the schema registry's credentials go over plain http: is url an
 * http URL, and does the properties file at path hold
 * schema.registry.basic.auth.user.info?  A file that cannot be read holds
 * none here: its own check says why.  Reads the file; never an error.
 */
bool
outbox_kafka_registry_in_clear(const char *url, const char *path)
{
	OutboxFileVersion version;
	OutboxPropertyError error;
	List	   *lines;
	ListCell   *lc;

	if (url == NULL || pg_strncasecmp(url, "http://", 7) != 0 ||
		path == NULL || *path == '\0' ||
		!outbox_kafka_read_file(path, &lines, &version, &error))
		return false;
	foreach(lc, lines)
	{
		char	   *line = trim(lfirst(lc));
		char	   *name;
		char	   *value;

		if (*line != '#' && split_property(line, &name, &value) &&
			strcmp(name, "schema.registry.basic.auth.user.info") == 0 && *value != '\0')
			return true;
	}
	return false;
}

/*
 * Warn that the schema registry's credentials go over plain http to url,
 * which holds none (check_schema_registry_url); no message shows them.
 */
void
outbox_kafka_warn_registry_in_clear(const char *url)
{
	ereport(WARNING,
			(errmsg("the schema registry's credentials go over plain http"),
			 errdetail("outbox.schema_registry_url is \"%s\", and the file that outbox.kafka_properties_file names holds schema.registry.basic.auth.user.info: whoever sees the traffic can read them.",
					   url),
			 errhint("Give the schema registry an https URL.")));
}

/*
 * outbox.kafka_properties_file: the file is read when a statement sets the
 * setting (set_by_statement), and refused if it cannot be used; for ALTER
 * DATABASE or ALTER ROLE ... SET, a file that does not exist yet only
 * earns a notice, as PGC_S_TEST asks.  Not when the setting is applied:
 * the worker reads the file itself when it builds its producer, and keeps
 * the producer it has if it cannot (kafka.c).  A file that holds the
 * schema registry's credentials while its URL is plain http earns a
 * warning.
 */
static bool
check_kafka_properties_file(char **newval, void **extra, GucSource source)
{
	OutboxPropertyError error;

	if (*newval == NULL || **newval == '\0' || !set_by_statement(source))
		return true;
	if (outbox_kafka_check_properties_file(*newval, &error))
	{
		if (outbox_kafka_registry_in_clear(outbox_schema_registry_url, *newval))
			outbox_kafka_warn_registry_in_clear(outbox_schema_registry_url);
		return true;
	}
	if (error.missing && source == PGC_S_TEST)
	{
		ereport(NOTICE,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg_internal("%s", error.message),
				 errdetail("The worker reads the file when it builds its producer.")));
		return true;
	}
	report_property_error(&error, source);
	return false;
}

/*
 * outbox.schema_registry_url: empty, or an http or https URL without
 * credentials (they go in the properties file, which no other role can
 * read), query or fragment, and without white space or control characters.
 * A statement that sets an http URL while the properties file holds the
 * registry's credentials earns a warning.
 */
static bool
check_schema_registry_url(char **newval, void **extra, GucSource source)
{
	const char *url = *newval;
	const char *authority;

	if (url == NULL || *url == '\0')
		return true;
	if (pg_strncasecmp(url, "http://", 7) == 0)
		authority = url + 7;
	else if (pg_strncasecmp(url, "https://", 8) == 0)
		authority = url + 8;
	else
	{
		GUC_check_errdetail("The schema registry's URL starts with http:// or https://.");
		return false;
	}
	for (const char *c = url; *c != '\0'; c++)
	{
		if ((unsigned char) *c <= ' ' || *c == 0x7f)
		{
			GUC_check_errdetail("The URL may hold no white space or control character.");
			return false;
		}
	}
	if (strpbrk(url, "?#") != NULL)
	{
		GUC_check_errdetail("The URL may hold no query or fragment: the paths of the registry's API follow it.");
		return false;
	}
	if (memchr(authority, '@', strcspn(authority, "/")) != NULL)
	{
		GUC_check_errmsg("invalid value for parameter \"outbox.schema_registry_url\"");
		GUC_check_errdetail("The URL may hold no user name or password.");
		GUC_check_errhint("Put them in the file that outbox.kafka_properties_file names, as schema.registry.basic.auth.user.info.");
		return false;
	}
	if (set_by_statement(source) &&
		outbox_kafka_registry_in_clear(url, outbox_kafka_properties_file))
		outbox_kafka_warn_registry_in_clear(url);
	return true;
}

/*
 * Define outbox.kafka_properties, outbox.kafka_properties_file and
 * outbox.schema_registry_url.  Called from _PG_init in every process that
 * loads the library, before the prefix is reserved.
 */
void
outbox_kafka_define_gucs(void)
{
	DefineCustomStringVariable("outbox.kafka_properties",
							   "Extra librdkafka producer properties, as name=value pairs separated by semicolons.",
							   "Only the properties known to be safe are allowed; secrets only where no catalog stores them.",
							   &outbox_kafka_properties,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   check_kafka_properties, NULL, NULL);

	DefineCustomStringVariable("outbox.kafka_properties_file",
							   "File of further librdkafka producer properties, one name=value per line, secrets included.",
							   "Read by the worker when it builds its producer; other users must have no access to it.",
							   &outbox_kafka_properties_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_kafka_properties_file, NULL, NULL);

	DefineCustomStringVariable("outbox.schema_registry_url",
							   "URL of the Confluent Schema Registry that Avro schemas are registered with; empty for none.",
							   "Its credentials are schema.registry.* properties of the file that outbox.kafka_properties_file names.",
							   &outbox_schema_registry_url,
							   "",
							   PGC_SUSET,
							   0,
							   check_schema_registry_url, NULL, NULL);
}
