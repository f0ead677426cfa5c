/*-------------------------------------------------------------------------
 *
 * registry.c
 *		A client of a Confluent Schema Registry: a schema registered under a
 *		subject, a schema fetched by its id, and the wire-format prefix that
 *		names a record's schema.
 *
 * HTTP with libcurl, to outbox.schema_registry_url, with the credentials
 * (basic auth, a CA, a client certificate) that the file of
 * outbox.kafka_properties_file holds as schema.registry.* properties (the
 * Kafka side skips them).  Each process caches what it learnt, by
 * (subject, schema text) and by id, for as long as the URL stays the same:
 * a schema registered again, or an id met again, costs no request.  This
 * is the one cache of schema ids: the formats ask it, and keep none of
 * their own.
 *
 * The ids of schemas registered in the application's transaction (change
 * events in Avro) are also kept in the table outbox_schema_ids, read and
 * written as the extension's owner, so that a session meets the registry
 * for a schema that no session registered before (a table attached, or
 * changed by DDL), not at its first change of a table: a registry that is
 * down fails only the changes that need a new schema.  The table has no
 * unique index (1.4), so that a session that keeps an id never waits for
 * another that keeps the same one: both rows serve, and the worker removes
 * the second (outbox_registry_tidy).
 *
 * An answer of the registry is untrusted input: it is bounded in size,
 * must come within REQUEST_TIMEOUT_MS, and is parsed as JSON of any shape.
 * A request can be cancelled (statement_timeout, pg_cancel_backend, a
 * shutdown): libcurl's progress callback stops the transfer, and the
 * interrupt is served once libcurl has returned, never inside a callback.
 * No message shows a credential.
 *
 * src/kafka/registry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <curl/curl.h>

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "base/catalog.h"
#include "base/guc.h"
#include "kafka/properties.h"
#include "kafka/registry.h"

/* how long a request may take, connection included */
#define REQUEST_TIMEOUT_MS 5000
/* the largest answer taken: a schema, with room to spare */
#define MAX_ANSWER_BYTES (8 * 1024 * 1024)
/* the media type of Confluent's REST API */
#define REGISTRY_MEDIA_TYPE "application/vnd.schemaregistry.v1+json"
/* the prefix of the properties of the file that are the registry's */
#define PROPERTY_PREFIX "schema.registry."

PG_FUNCTION_INFO_V1(outbox_registry_check);
PG_FUNCTION_INFO_V1(outbox_registry_warning);

/* a schema registered under a subject: the hash key points at the strings */
typedef struct SubjectSchema
{
	const char *subject;
	const char *schema;
} SubjectSchema;

typedef struct RegisteredEntry
{
	SubjectSchema key;			/* strings in registry_cxt */
	int32		id;
} RegisteredEntry;

typedef struct SchemaEntry
{
	int32		id;				/* hash key */
	char	   *schema;			/* in registry_cxt */
} SchemaEntry;

/* what the process learnt of the registry at cached_url */
static MemoryContext registry_cxt = NULL;
static char *cached_url = NULL;
static HTAB *registered = NULL;
static HTAB *schemas = NULL;

/* a schema's id kept, by fingerprint: any of its rows, all given by the registry */
static OutboxPlan kept_id_plan = {
	"SELECT schema_id FROM %1$s.outbox_schema_ids"
	" WHERE fingerprint OPERATOR(pg_catalog.=) $1 LIMIT 1",
	1, {BYTEAOID}
};

/*
 * A schema's id kept.  From 1.4 no unique index arbitrates, so the insert
 * never waits for another transaction that keeps the same fingerprint; at
 * 1.3 the primary key on the fingerprint does, and a second session waits
 * for the first to end, as 1.3 did.
 */
static OutboxPlan keep_id_plan = {
	"INSERT INTO %1$s.outbox_schema_ids (fingerprint, subject, schema_id)"
	" VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
	3, {BYTEAOID, TEXTOID, INT4OID}
};

/* the rows that repeat a fingerprint's, the first of each kept */
static OutboxPlan tidy_ids_plan = {
	"DELETE FROM %1$s.outbox_schema_ids r"
	" WHERE EXISTS (SELECT FROM %1$s.outbox_schema_ids k"
	"                WHERE k.fingerprint OPERATOR(pg_catalog.=) r.fingerprint"
	"                  AND k.ctid OPERATOR(pg_catalog.<) r.ctid)",
	0, {InvalidOid}
};

/* the libcurl handle, kept so that its connection is reused */
static CURL *curl = NULL;

/* the schema.registry.* properties of the properties file, NULL if unset */
typedef struct Credentials
{
	char	   *user_info;		/* basic.auth.user.info: user:password */
	char	   *ca;				/* ssl.ca.location */
	char	   *certificate;	/* ssl.certificate.location */
	char	   *key;			/* ssl.key.location */
	char	   *key_password;	/* ssl.key.password */
} Credentials;

/* the top-level fields of an answer that the client reads, NULL if absent */
typedef struct Answer
{
	char	   *id;
	char	   *schema;
	char	   *error_code;
	char	   *message;
	char	   *compatibility;
	int			depth;			/* parsing: nesting of the current token */
	char	  **field;			/* parsing: where a top-level scalar goes */
} Answer;

/* an answer as it arrives, malloc'd: the callbacks must not palloc */
typedef struct Download
{
	char	   *data;
	size_t		len;
	bool		too_large;
} Download;

static uint32
subject_schema_hash(const void *key, Size keysize)
{
	const SubjectSchema *k = (const SubjectSchema *) key;

	return hash_combine(string_hash(k->subject, strlen(k->subject) + 1),
						hash_any((const unsigned char *) k->schema, strlen(k->schema)));
}

static int
subject_schema_match(const void *key1, const void *key2, Size keysize)
{
	const SubjectSchema *a = (const SubjectSchema *) key1;
	const SubjectSchema *b = (const SubjectSchema *) key2;

	return strcmp(a->subject, b->subject) != 0 || strcmp(a->schema, b->schema) != 0;
}

/*
 * The URL of the registry, without a trailing slash; the caches emptied if
 * it is not the one they were filled from.  Not set: an error.
 */
static const char *
registry_url(void)
{
	HASHCTL		ctl;

	if (outbox_schema_registry_url == NULL || *outbox_schema_registry_url == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("no schema registry is set"),
				 errhint("A superuser sets outbox.schema_registry_url.")));
	if (cached_url != NULL && strcmp(cached_url, outbox_schema_registry_url) == 0)
		return cached_url;

	if (registry_cxt == NULL)
		registry_cxt = AllocSetContextCreate(TopMemoryContext, "outbox schema registry",
											 ALLOCSET_SMALL_SIZES);
	MemoryContextReset(registry_cxt);
	cached_url = NULL;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(SubjectSchema);
	ctl.entrysize = sizeof(RegisteredEntry);
	ctl.hash = subject_schema_hash;
	ctl.match = subject_schema_match;
	ctl.hcxt = registry_cxt;
	registered = hash_create("outbox registered schemas", 16, &ctl,
							 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(SchemaEntry);
	ctl.hcxt = registry_cxt;
	schemas = hash_create("outbox schemas by id", 16, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	cached_url = MemoryContextStrdup(registry_cxt, outbox_schema_registry_url);
	for (char *end = cached_url + strlen(cached_url);
		 end > cached_url && end[-1] == '/'; end--)
		end[-1] = '\0';
	return cached_url;
}

/* the libcurl handle, made on first use */
static CURL *
curl_handle(void)
{
	if (curl == NULL)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
			(curl = curl_easy_init()) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not initialize libcurl")));
	}
	return curl;
}

/* white space around s trimmed, in place */
static char *
trim_space(char *s)
{
	char	   *end;

	s += strspn(s, " \t\r\n");
	end = s + strlen(s);
	while (end > s && strchr(" \t\r\n", end[-1]) != NULL)
		*--end = '\0';
	return s;
}

/*
 * The schema.registry.* properties of the file that
 * outbox.kafka_properties_file names (the worker reads the same file, and
 * checks the rest of it), read as outbox_kafka_read_file reads it: never
 * blocking, a regular file that other users cannot read.  No message shows
 * a value.
 */
static void
read_credentials(Credentials *cred)
{
	const char *path = outbox_kafka_properties_file;
	OutboxFileVersion version;
	OutboxPropertyError error;
	const char *problem;
	List	   *lines;
	ListCell   *lc;

	memset(cred, 0, sizeof(*cred));
	if (path == NULL || *path == '\0')
		return;
	if (!outbox_kafka_read_file(path, &lines, &version, &error))
		ereport(ERROR,
				(errcode(error.missing ? ERRCODE_UNDEFINED_FILE : ERRCODE_CONFIG_FILE_ERROR),
				 errmsg_internal("%s", error.message),
				 error.detail[0] ? errdetail_internal("%s", error.detail) : 0,
				 error.hint ? errhint("%s", error.hint) : 0));

	foreach(lc, lines)
	{
		char	   *name = trim_space(lfirst(lc));
		char	   *value = strchr(name, '=');
		char	  **field;

		if (strncmp(name, PROPERTY_PREFIX, strlen(PROPERTY_PREFIX)) != 0 || value == NULL)
			continue;			/* Kafka's: the worker judges them */
		*value = '\0';
		value = pstrdup(trim_space(value + 1));
		name = trim_space(name) + strlen(PROPERTY_PREFIX);
		if (strcmp(name, "basic.auth.user.info") == 0)
			field = &cred->user_info;
		else if (strcmp(name, "ssl.ca.location") == 0)
			field = &cred->ca;
		else if (strcmp(name, "ssl.certificate.location") == 0)
			field = &cred->certificate;
		else if (strcmp(name, "ssl.key.location") == 0)
			field = &cred->key;
		else if (strcmp(name, "ssl.key.password") == 0)
			field = &cred->key_password;
		else					/* named up to a separator: what follows may be a secret */
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("unknown schema registry property \"%s%.*s\" in file \"%s\", line %d",
							PROPERTY_PREFIX, (int) strcspn(name, " \t:"), name, path,
							foreach_current_index(lc) + 1),
					 errhint("The schema registry properties are basic.auth.user.info, ssl.ca.location, ssl.certificate.location, ssl.key.location and ssl.key.password, each after \"%s\".",
							 PROPERTY_PREFIX)));
		if (field != &cred->user_info && field != &cred->key_password &&
			(problem = outbox_kafka_path_problem(value)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("invalid schema registry property \"%s%s\" in file \"%s\", line %d",
							PROPERTY_PREFIX, name, path, foreach_current_index(lc) + 1),
					 errdetail_internal("%s", problem)));
		*field = value;
	}
}

/*
 * Warn that the credentials go over plain http to url, once per process,
 * URL and properties file: the first request of a backend says it, not
 * every one.
 */
static void
warn_in_clear_once(const char *url)
{
	static char *warned = NULL;
	char	   *config = psprintf("%s\n%s", url, outbox_kafka_properties_file);

	if (warned != NULL && strcmp(warned, config) == 0)
		return;
	outbox_kafka_warn_registry_in_clear(url);
	if (warned != NULL)
		pfree(warned);
	warned = MemoryContextStrdup(TopMemoryContext, config);
}

/* libcurl's write callback: the answer, up to MAX_ANSWER_BYTES */
static size_t
take_answer(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Download   *d = (Download *) arg;
	size_t		n = size * nmemb;
	char	   *data;

	if (n > MAX_ANSWER_BYTES - d->len)
	{
		d->too_large = true;
		return 0;
	}
	data = realloc(d->data, d->len + n + 1);
	if (data == NULL)
		return 0;
	memcpy(data + d->len, ptr, n);
	d->len += n;
	data[d->len] = '\0';
	d->data = data;
	return n;
}

/* libcurl's progress callback: stop the transfer when an interrupt waits */
static int
interrupted(void *arg, curl_off_t dltotal, curl_off_t dlnow,
			curl_off_t ultotal, curl_off_t ulnow)
{
	return QueryCancelPending || ProcDiePending;
}

#define SET_OPTION(option, value) \
	(ok = ok && curl_easy_setopt(curl, option, value) == CURLE_OK)

/*
 * Send a request to the registry (body NULL: a GET, else a POST of it) and
 * return the HTTP status; the answer, in the server encoding, in *answer.
 * An error if the registry cannot be reached or its answer cannot be
 * taken, naming the URL.
 */
static long
request(const char *path, const char *body, StringInfo answer)
{
	const char *url = registry_url();
	char	   *full_url = psprintf("%s%s", url, path);
	Credentials cred;
	Download	download = {0};
	char		curl_error[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL;
	CURLcode	rc = CURLE_OK;
	long		status = 0;
	bool		ok = true;

	curl_easy_reset(curl_handle());
	read_credentials(&cred);
	if (cred.user_info != NULL && *cred.user_info != '\0' &&
		pg_strncasecmp(url, "http://", 7) == 0)
		warn_in_clear_once(url);
	headers = curl_slist_append(headers, "Accept: " REGISTRY_MEDIA_TYPE ", application/json");
	if (body != NULL)
	{
		headers = curl_slist_append(headers, "Content-Type: " REGISTRY_MEDIA_TYPE);
		/* the body at once, not after a "100 Continue" */
		headers = curl_slist_append(headers, "Expect:");
	}
	ok = headers != NULL;

	SET_OPTION(CURLOPT_URL, full_url);
	SET_OPTION(CURLOPT_PROTOCOLS_STR, "http,https");
	SET_OPTION(CURLOPT_NOSIGNAL, 1L);
	SET_OPTION(CURLOPT_TIMEOUT_MS, (long) REQUEST_TIMEOUT_MS);
	SET_OPTION(CURLOPT_ERRORBUFFER, curl_error);
	SET_OPTION(CURLOPT_HTTPHEADER, headers);
	SET_OPTION(CURLOPT_WRITEFUNCTION, take_answer);
	SET_OPTION(CURLOPT_WRITEDATA, &download);
	SET_OPTION(CURLOPT_NOPROGRESS, 0L);
	SET_OPTION(CURLOPT_XFERINFOFUNCTION, interrupted);
	if (body != NULL)
		SET_OPTION(CURLOPT_POSTFIELDS, body);
	if (cred.user_info != NULL)
	{
		SET_OPTION(CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		SET_OPTION(CURLOPT_USERPWD, cred.user_info);
	}
	if (cred.ca != NULL)
		SET_OPTION(CURLOPT_CAINFO, cred.ca);
	if (cred.certificate != NULL)
		SET_OPTION(CURLOPT_SSLCERT, cred.certificate);
	if (cred.key != NULL)
		SET_OPTION(CURLOPT_SSLKEY, cred.key);
	/* never none: OpenSSL would ask for it on the terminal */
	SET_OPTION(CURLOPT_KEYPASSWD, cred.key_password ? cred.key_password : "");

	if (ok)
	{
		rc = curl_easy_perform(curl);
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	}
	/* the options point at what ends here (the connection is kept) */
	curl_easy_reset(curl);
	curl_slist_free_all(headers);
	if (cred.key_password != NULL)
		explicit_bzero(cred.key_password, strlen(cred.key_password));
	if (cred.user_info != NULL)
		explicit_bzero(cred.user_info, strlen(cred.user_info));

	if (!ok || rc != CURLE_OK)
	{
		free(download.data);
		CHECK_FOR_INTERRUPTS();
		if (download.too_large)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("the schema registry at \"%s\" gave an answer larger than %d bytes",
							url, MAX_ANSWER_BYTES)));
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not reach the schema registry at \"%s\"", url),
				 errdetail("%s.", curl_error[0] ? curl_error :
						   !ok ? "libcurl refused an option" : curl_easy_strerror(rc))));
	}
	resetStringInfo(answer);
	if (download.len > 0)
		appendBinaryStringInfo(answer, download.data, download.len);
	free(download.data);
	if (!pg_verify_mbstr(PG_UTF8, answer->data, answer->len, true))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the schema registry at \"%s\" answered with text that is not UTF-8", url)));
	if (GetDatabaseEncoding() != PG_UTF8)
	{
		char	   *converted = pg_any_to_server(answer->data, answer->len, PG_UTF8);

		resetStringInfo(answer);
		appendStringInfoString(answer, converted);
	}
	pfree(full_url);
	return status;
}

static void
answer_object_start(void *state)
{
	((Answer *) state)->depth++;
	((Answer *) state)->field = NULL;
}

static void
answer_object_end(void *state)
{
	((Answer *) state)->depth--;
}

static void
answer_field_start(void *state, char *fname, bool isnull)
{
	Answer	   *a = (Answer *) state;

	a->field = NULL;
	if (a->depth != 1)
		return;
	if (strcmp(fname, "id") == 0)
		a->field = &a->id;
	else if (strcmp(fname, "schema") == 0)
		a->field = &a->schema;
	else if (strcmp(fname, "error_code") == 0)
		a->field = &a->error_code;
	else if (strcmp(fname, "message") == 0)
		a->field = &a->message;
	else if (strcmp(fname, "compatibilityLevel") == 0)
		a->field = &a->compatibility;
}

static void
answer_scalar(void *state, char *token, JsonTokenType tokentype)
{
	Answer	   *a = (Answer *) state;

	if (a->depth == 1 && a->field != NULL && tokentype != JSON_TOKEN_NULL)
		*a->field = token;
	a->field = NULL;
}

/*
 * Read the top-level fields of a JSON object answer that the client uses;
 * false if it is not a JSON object.
 */
static bool
parse_answer(const char *text, Answer *a)
{
	JsonLexContext *lex;
	JsonSemAction sem = {0};

	memset(a, 0, sizeof(*a));
	if (text[strspn(text, " \t\r\n")] != '{')
		return false;
	lex = makeJsonLexContextCstringLen(unconstify(char *, text), strlen(text),
									  GetDatabaseEncoding(), true);
	sem.semstate = a;
	sem.object_start = answer_object_start;
	sem.object_end = answer_object_end;
	sem.array_start = answer_object_start;
	sem.array_end = answer_object_end;
	sem.object_field_start = answer_field_start;
	sem.scalar = answer_scalar;
	return pg_parse_json(lex, &sem) == JSON_SUCCESS;
}

/*
 * Check the status and shape of an answer: an error if the registry
 * refused the request (what says what was asked) or answered something
 * other than a JSON object.
 */
static void
check_answer(long status, const char *text, Answer *a, const char *what)
{
	bool		object = parse_answer(text, a);

	if (status == 401 || status == 403)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("the schema registry at \"%s\" refused %s: HTTP %ld",
						cached_url, what, status),
				 object && a->message ? errdetail_internal("%s", a->message) : 0,
				 errhint("Its credentials are schema.registry.basic.auth.user.info, or a client certificate, in the file that outbox.kafka_properties_file names.")));
	if (status >= 400 && status < 500 && object && a->message != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the schema registry at \"%s\" refused %s", cached_url, what),
				 errdetail_internal("%s", a->message)));
	if (status < 200 || status >= 300)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the schema registry at \"%s\" failed %s: HTTP %ld",
						cached_url, what, status),
				 object && a->message ? errdetail_internal("%s", a->message) : 0));
	if (!object)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the schema registry at \"%s\" gave an answer to %s that is not a JSON object",
						cached_url, what)));
}

/* a schema id of an answer, or an error */
static int32
answer_id(const Answer *a, const char *what)
{
	char	   *end;
	long		id;

	errno = 0;
	id = a->id ? strtol(a->id, &end, 10) : -1;
	if (a->id == NULL || *end != '\0' || errno != 0 || id < 1 || id > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the schema registry at \"%s\" gave no schema id in its answer to %s",
						cached_url, what)));
	return (int32) id;
}

/* the schema's text, or an error */
static const char *
answer_schema(const Answer *a, const char *what)
{
	if (a->schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the schema registry at \"%s\" gave no schema in its answer to %s",
						cached_url, what)));
	return a->schema;
}

/* the path of the registry's resource of a subject, escaped */
static char *
subject_path(const char *subject, const char *rest)
{
	char	   *escaped = curl_easy_escape(curl_handle(), subject, 0);
	char	   *path;

	if (escaped == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	path = psprintf("/subjects/%s%s", escaped, rest);
	curl_free(escaped);
	return path;
}

/* a SchemaEntry of id, with a copy of schema */
static void
remember_schema(int32 id, const char *schema)
{
	char	   *copy;

	if (hash_search(schemas, &id, HASH_FIND, NULL) != NULL)
		return;
	copy = MemoryContextStrdup(registry_cxt, schema);
	((SchemaEntry *) hash_search(schemas, &id, HASH_ENTER, NULL))->schema = copy;
}

/*
 * The id of schema under subject that this process knows, or 0.
 */
static int32
known_id(const char *subject, const char *schema)
{
	SubjectSchema key = {subject, schema};
	RegisteredEntry *entry;

	registry_url();
	entry = hash_search(registered, &key, HASH_FIND, NULL);
	return entry != NULL ? entry->id : 0;
}

/*
 * Remember that schema has id under subject, both ways.
 */
static void
remember(const char *subject, const char *schema, int32 id)
{
	SubjectSchema key;

	/* the key's strings copied before the entry exists, which points at them */
	key.subject = MemoryContextStrdup(registry_cxt, subject);
	key.schema = MemoryContextStrdup(registry_cxt, schema);
	((RegisteredEntry *) hash_search(registered, &key, HASH_ENTER, NULL))->id = id;
	remember_schema(id, schema);
}

int32
outbox_registry_register(const char *subject, const char *schema_json)
{
	StringInfoData body;
	StringInfoData answer;
	Answer		a;
	char	   *what;
	int32		id;

	if ((id = known_id(subject, schema_json)) != 0)
		return id;

	initStringInfo(&body);
	appendStringInfoString(&body, "{\"schema\":");
	escape_json(&body, schema_json);
	appendStringInfoChar(&body, '}');
	initStringInfo(&answer);
	what = psprintf("the schema of subject \"%s\"", subject);
	check_answer(request(subject_path(subject, "/versions"),
						 pg_server_to_any(body.data, body.len, PG_UTF8), &answer),
				 answer.data, &a, what);

	id = answer_id(&a, what);
	remember(subject, schema_json, id);
	return id;
}

/*
 * The SHA-256 of the registry's URL, subject and schema, as the key of
 * outbox_schema_ids, into fingerprint.
 */
static void
fingerprint_of(const char *subject, const char *schema, uint8 *fingerprint)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	const char *url = outbox_schema_registry_url ? outbox_schema_registry_url : "";

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) url, strlen(url) + 1) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) subject, strlen(subject) + 1) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) schema, strlen(schema)) < 0 ||
		pg_cryptohash_final(ctx, fingerprint, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute a SHA-256 hash: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
}

int32
outbox_registry_id(const OutboxExtension *ext, const char *subject, const char *schema_json)
{
	uint8		fingerprint[PG_SHA256_DIGEST_LENGTH];
	bytea	   *key;
	Datum		values[3];
	int32		id;

	if ((id = known_id(subject, schema_json)) != 0)
		return id;
	if (ext->version < OUTBOX_VERSION(1, 3))
		return outbox_registry_register(subject, schema_json);

	fingerprint_of(subject, schema_json, fingerprint);
	key = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	SET_VARSIZE(key, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	memcpy(VARDATA(key), fingerprint, PG_SHA256_DIGEST_LENGTH);
	values[0] = PointerGetDatum(key);
	values[1] = CStringGetTextDatum(subject);
	SPI_connect();
	if (outbox_run_as_owner(ext, &kept_id_plan, values, NULL, -1) > 0)
	{
		bool		isnull;

		id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										 &isnull));
		remember(subject, schema_json, id);
	}
	else
	{
		id = outbox_registry_register(subject, schema_json);
		values[2] = Int32GetDatum(id);
		outbox_run_as_owner(ext, &keep_id_plan, values, NULL, -1);
	}
	SPI_finish();
	return id;
}

void
outbox_registry_tidy(const OutboxExtension *ext)
{
	if (ext->version < OUTBOX_VERSION(1, 4))
		return;
	SPI_connect();
	outbox_run(ext, &tidy_ids_plan, NULL, -1);
	SPI_finish();
}

const char *
outbox_registry_schema(int32 id)
{
	SchemaEntry *entry;
	StringInfoData answer;
	Answer		a;
	char	   *what;

	registry_url();
	entry = hash_search(schemas, &id, HASH_FIND, NULL);
	if (entry != NULL)
		return entry->schema;

	initStringInfo(&answer);
	what = psprintf("schema id %d", id);
	check_answer(request(psprintf("/schemas/ids/%d", id), NULL, &answer),
				 answer.data, &a, what);
	remember_schema(id, answer_schema(&a, what));
	entry = hash_search(schemas, &id, HASH_FIND, NULL);
	return entry->schema;
}

void
outbox_registry_frame(StringInfo buf, int32 id)
{
	uint32		n = pg_hton32((uint32) id);

	appendStringInfoChar(buf, '\0');
	appendBinaryStringInfo(buf, (const char *) &n, sizeof(n));
}

/*
 * outbox_registry_check() RETURNS text: whether the schema registry
 * answers, with its URL and its compatibility level; an error that says
 * why if it does not.
 */
Datum
outbox_registry_check(PG_FUNCTION_ARGS)
{
	StringInfoData answer;
	Answer		a;
	const char *what = "a look at its configuration";

	initStringInfo(&answer);
	check_answer(request("/config", NULL, &answer), answer.data, &a, what);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("the schema registry at \"%s\" answers, compatibility %s",
											  cached_url,
											  a.compatibility ? a.compatibility : "not given")));
}

/*
 * outbox_registry_warning() RETURNS text: for outbox_health, what is unsafe
 * in how this session's settings reach the schema registry (credentials
 * over plain http), or NULL.
 */
Datum
outbox_registry_warning(PG_FUNCTION_ARGS)
{
	if (!outbox_kafka_registry_in_clear(outbox_schema_registry_url,
										outbox_kafka_properties_file))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("credentials go over plain http to %s: schema.registry.basic.auth.user.info of the file that outbox.kafka_properties_file names",
											  outbox_schema_registry_url)));
}
