/*-------------------------------------------------------------------------
 *
 * topics.c
 *		The settings of topics: outbox_set_topic(), outbox_reset_topic(),
 *		outbox_topic(), and their reading by the worker, which takes for a
 *		topic the row of the longest pattern that matches it.  Superusers
 *		only; the table belongs to the bootstrap superuser.  docs/design.md,
 *		"Producers per cluster", says why.
 *
 * src/format/topics.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "base/catalog.h"
#include "base/event.h"
#include "base/guc.h"
#include "format/format_internal.h"
#include "format/topics.h"
#include "kafka/kafka.h"
#include "kafka/properties.h"

static OutboxPlan settings_plan = {
	"SELECT s.pattern, s.brokers, s.properties_file, s.format, s.value_schema::text,"
	"       s.key_schema::text, s.value_schema_id, s.key_schema_id, s.cloudevents_source"
	"  FROM %1$s.outbox_topic_settings s"
};

static OutboxPlan set_plan = {
	"INSERT INTO %1$s.outbox_topic_settings AS s (pattern, brokers, properties_file,"
	"       format, value_schema, key_schema, value_schema_id, key_schema_id,"
	"       cloudevents_source)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
	" ON CONFLICT (pattern) DO UPDATE"
	"   SET brokers = excluded.brokers, properties_file = excluded.properties_file,"
	"       format = excluded.format, value_schema = excluded.value_schema,"
	"       key_schema = excluded.key_schema,"
	"       value_schema_id = excluded.value_schema_id,"
	"       key_schema_id = excluded.key_schema_id,"
	"       cloudevents_source = excluded.cloudevents_source, updated_at = now()",
	9, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, INT4OID, INT4OID, TEXTOID}
};

static OutboxPlan reset_plan = {
	"DELETE FROM %1$s.outbox_topic_settings s WHERE s.pattern = $1",
	1, {TEXTOID}
};

/*
 * The format of topics a name stands for; an error for a name that is
 * none.
 */
static const OutboxFormat *
format_named(const char *name)
{
	const OutboxFormat *format = outbox_format_named(name, true);

	if (format == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown record format \"%s\"", name),
				 errhint("The formats are %s; NULL publishes the payload as given.",
						 outbox_format_names(true, false))));
	return format;
}

/*
 * The rows of outbox_topic_settings, in the current memory context; none
 * in a database whose extension is older than 1.3.  The caller holds a
 * transaction with an active snapshot; this takes a connection to SPI.
 */
OutboxTopicSettings *
outbox_topic_settings_load(const OutboxExtension *ext)
{
	MemoryContext cxt = CurrentMemoryContext;
	OutboxTopicSettings *settings = palloc0(sizeof(OutboxTopicSettings));

	if (ext->version < OUTBOX_VERSION(1, 3))
		return settings;
	SPI_connect();
	outbox_run(ext, &settings_plan, NULL, -1);
	settings->count = (int) SPI_processed;
	settings->rows = MemoryContextAllocZero(cxt, sizeof(OutboxTopicSetting) *
											(SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *value;

		settings->rows[i].pattern = MemoryContextStrdup(cxt, SPI_getvalue(tuple, desc, 1));
		if ((value = SPI_getvalue(tuple, desc, 2)) != NULL)
			settings->rows[i].cluster.brokers = MemoryContextStrdup(cxt, value);
		if ((value = SPI_getvalue(tuple, desc, 3)) != NULL)
			settings->rows[i].cluster.properties_file = MemoryContextStrdup(cxt, value);
		if ((value = SPI_getvalue(tuple, desc, 4)) != NULL)
			settings->rows[i].format = format_named(value);
		if ((value = SPI_getvalue(tuple, desc, 5)) != NULL)
			settings->rows[i].value_schema = MemoryContextStrdup(cxt, value);
		if ((value = SPI_getvalue(tuple, desc, 6)) != NULL)
			settings->rows[i].key_schema = MemoryContextStrdup(cxt, value);
		if ((value = SPI_getvalue(tuple, desc, 7)) != NULL)
			settings->rows[i].value_schema_id = pg_strtoint32(value);
		if ((value = SPI_getvalue(tuple, desc, 8)) != NULL)
			settings->rows[i].key_schema_id = pg_strtoint32(value);
		if ((value = SPI_getvalue(tuple, desc, 9)) != NULL)
			settings->rows[i].cloudevents_source = MemoryContextStrdup(cxt, value);
	}
	SPI_finish();
	return settings;
}

/*
 * The setting of topic: the row of the longest pattern that matches it,
 * its own name first; NULL if none does.
 */
const OutboxTopicSetting *
outbox_topic_setting(const OutboxTopicSettings *settings, const char *topic)
{
	const OutboxTopicSetting *best = NULL;
	int			best_len = -1;

	for (int i = 0; i < settings->count; i++)
	{
		const char *pattern = settings->rows[i].pattern;
		int			len = strlen(pattern);

		if (strcmp(pattern, topic) == 0)
			return &settings->rows[i];
		if (len > 0 && pattern[len - 1] == '*' && len - 1 > best_len &&
			strncmp(pattern, topic, len - 1) == 0)
		{
			best = &settings->rows[i];
			best_len = len - 1;
		}
	}
	return best;
}

/*
 * The rows of outbox_topic_settings as enqueue reads them, kept by the
 * backend until the table changes: its trigger invalidates them
 * (outbox_topic_settings_changed), here and, at commit, in every backend.
 */
static MemoryContext enqueue_settings_cxt = NULL;
static OutboxTopicSettings *enqueue_settings = NULL;
static Oid	enqueue_settings_relid = InvalidOid;

/* The relcache callback: forget the settings kept if their table changed. */
static void
forget_enqueue_settings(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == enqueue_settings_relid)
		enqueue_settings = NULL;
}

/*
 * Read the rows of outbox_topic_settings into enqueue_settings, and return
 * them (kept until the next read, even if forgotten meanwhile): pattern,
 * format, the schemas and their ids, cloudevents_source, what enqueue
 * needs.  Read as the table is now (the latest committed rows and the
 * transaction's own), whatever the transaction's snapshot, without
 * checking the rights of the caller, who may enqueue without reading the
 * table.  Runs no user code, and reads a table of the bootstrap superuser
 * only.
 */
static OutboxTopicSettings *
load_enqueue_settings(const OutboxExtension *ext)
{
	static const char *const names[] = {"pattern", "format", "value_schema", "key_schema",
	"value_schema_id", "key_schema_id", "cloudevents_source"};
	Relation	rel = table_open(outbox_relation(ext, "outbox_topic_settings"),
								 AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	AttrNumber	attnum[lengthof(names)];
	SysScanDesc scan;
	HeapTuple	tuple;
	OutboxTopicSettings *settings;
	MemoryContext old;
	int			size = 8;

	if (rel->rd_rel->relowner != BOOTSTRAP_SUPERUSERID)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table \"%s\" of extension outbox is not owned by the bootstrap superuser",
						RelationGetRelationName(rel))));
	for (int i = 0; i < lengthof(names); i++)
		if ((attnum[i] = get_attnum(RelationGetRelid(rel), names[i])) == InvalidAttrNumber)
			elog(ERROR, "outbox_topic_settings has no column \"%s\"", names[i]);
	if (enqueue_settings_cxt == NULL)
	{
		enqueue_settings_cxt = AllocSetContextCreate(CacheMemoryContext,
													 "outbox topic settings",
													 ALLOCSET_SMALL_SIZES);
		outbox_on_relation_change(forget_enqueue_settings);
	}
	MemoryContextReset(enqueue_settings_cxt);
	enqueue_settings_relid = RelationGetRelid(rel);
	old = MemoryContextSwitchTo(enqueue_settings_cxt);
	settings = palloc0(sizeof(OutboxTopicSettings));
	settings->rows = palloc0(sizeof(OutboxTopicSetting) * size);
	/* set before the scan: an invalidation during it forgets what it read */
	enqueue_settings = settings;
	PG_TRY();
	{
		scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			OutboxTopicSetting *row;
			Datum		values[lengthof(names)];
			bool		nulls[lengthof(names)];

			if (settings->count == size)
			{
				size *= 2;
				settings->rows = repalloc(settings->rows, sizeof(OutboxTopicSetting) * size);
			}
			row = &settings->rows[settings->count++];
			memset(row, 0, sizeof(*row));
			for (int i = 0; i < lengthof(names); i++)
				values[i] = heap_getattr(tuple, attnum[i], desc, &nulls[i]);
			row->pattern = TextDatumGetCString(values[0]);
			if (!nulls[1])
				row->format = format_named(TextDatumGetCString(values[1]));
			for (int i = 0; i < 2; i++)
			{
				Jsonb	   *schema;

				if (nulls[2 + i])
					continue;
				schema = DatumGetJsonbP(values[2 + i]);
				*(i == 0 ? &row->value_schema : &row->key_schema) =
					JsonbToCString(NULL, &schema->root, VARSIZE(schema));
				if (!nulls[4 + i])
					*(i == 0 ? &row->value_schema_id : &row->key_schema_id) =
						DatumGetInt32(values[4 + i]);
			}
			if (!nulls[6])
				row->cloudevents_source = TextDatumGetCString(values[6]);
		}
		systable_endscan(scan);
	}
	PG_CATCH();
	{
		enqueue_settings = NULL;
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	table_close(rel, AccessShareLock);
	return settings;
}

/*
 * The setting of topic as outbox_enqueue and the capture triggers see it
 * (no cluster: pattern, format, schemas, source); NULL if it has none, or
 * in a database whose extension is older than 1.3.  The caller holds a
 * transaction.
 */
const OutboxTopicSetting *
outbox_topic_setting_to_enqueue(const OutboxExtension *ext, const char *topic)
{
	if (ext->version < OUTBOX_VERSION(1, 3))
		return NULL;
	AcceptInvalidationMessages();
	return outbox_topic_setting(enqueue_settings != NULL ? enqueue_settings :
								load_enqueue_settings(ext), topic);
}

PG_FUNCTION_INFO_V1(outbox_topic_settings_changed);

/*
 * outbox_topic_settings_changed() RETURNS trigger
 *
 * After each statement that writes outbox_topic_settings: the settings
 * that backends keep for enqueue are out of date, here at once and in the
 * others once the transaction commits.
 */
Datum
outbox_topic_settings_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "outbox_topic_settings_changed: not called as a trigger");
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * Raise an error unless pattern is a topic name, or a prefix of one
 * followed by '*' (a lone '*' matches every topic).
 */
static void
check_pattern(text *pattern)
{
	char	   *s = text_to_cstring(pattern);
	int			len = strlen(s);
	const char *problem = NULL;

	/* a prefix may be "." or "..": longer names start with them */
	if (len > 0 && s[len - 1] == '*')
		len--;
	if (len < strlen(s) && (len == 0 || strspn(s, ".") == len))
		problem = len > 249 ? outbox_topic_problem(s, len) : NULL;
	else
		problem = outbox_topic_problem(s, len);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid topic pattern \"%s\"", s),
				 errdetail("%s", problem),
				 errhint("A pattern is a topic name, or the start of one followed by \"*\".")));
}

/*
 * Raise an error unless the caller may set topics' settings: a superuser.
 */
static void
check_rights(void)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to change the settings of topics"),
				 errdetail("Only superusers may choose where events and the credentials of the Kafka properties go.")));
}

/*
 * Raise an error unless the properties file at path can be used, as the
 * setting outbox.kafka_properties_file would; a file that does not exist
 * yet earns a notice, as it does there.
 */
static void
check_properties_file(const char *path)
{
	OutboxPropertyError error;

	if (*path == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the Kafka properties file must not be empty"),
				 errhint("Give NULL for the file that outbox.kafka_properties_file names.")));
	if (outbox_kafka_check_properties_file(path, &error))
		return;
	if (error.missing)
	{
		ereport(NOTICE,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg_internal("%s", error.message),
				 errdetail("The worker reads the file when it builds its producer.")));
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg_internal("%s", error.message),
			 error.detail[0] ? errdetail_internal("%s", error.detail) : 0,
			 error.hint ? errhint("%s", error.hint) : 0));
}

PG_FUNCTION_INFO_V1(outbox_set_topic);
PG_FUNCTION_INFO_V1(outbox_reset_topic);
PG_FUNCTION_INFO_V1(outbox_topic);

/*
 * outbox_set_topic(pattern text, brokers text DEFAULT NULL,
 *					properties_file text DEFAULT NULL, format text DEFAULT NULL,
 *					value_schema jsonb DEFAULT NULL, key_schema jsonb DEFAULT NULL,
 *					cloudevents_source text DEFAULT NULL) RETURNS void
 *
 * Set the settings of the topics that pattern matches, all of them: an
 * argument left NULL is the outbox.* setting, or no format.
 */
Datum
outbox_set_topic(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	OutboxTopicSetting setting = {0};
	Datum		values[9];
	char		nulls[9];
	int			ret;

	check_rights();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the topic pattern must not be NULL")));
	check_pattern(PG_GETARG_TEXT_PP(0));
	setting.pattern = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (!PG_ARGISNULL(1) && *text_to_cstring(PG_GETARG_TEXT_PP(1)) == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the brokers must not be empty"),
				 errhint("Give NULL for the brokers that outbox.brokers names.")));
	if (!PG_ARGISNULL(2))
		check_properties_file(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	if (!PG_ARGISNULL(3))
		setting.format = format_named(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	for (int i = 0; i < 2; i++)
	{
		Jsonb	   *schema;

		if (PG_ARGISNULL(4 + i))
			continue;
		schema = PG_GETARG_JSONB_P(4 + i);
		*(i == 0 ? &setting.value_schema : &setting.key_schema) =
			JsonbToCString(NULL, &schema->root, VARSIZE(schema));
	}
	if (!PG_ARGISNULL(6))
		setting.cloudevents_source = text_to_cstring(PG_GETARG_TEXT_PP(6));
	/* checked by its format, which completes it (the schemas' ids) */
	outbox_format_check_topic(&setting);

	/* pattern, brokers, properties_file, format, the schemas */
	for (int i = 0; i < 6; i++)
	{
		values[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	values[6] = Int32GetDatum(setting.value_schema_id);
	nulls[6] = setting.value_schema_id == 0 ? 'n' : ' ';
	values[7] = Int32GetDatum(setting.key_schema_id);
	nulls[7] = setting.key_schema_id == 0 ? 'n' : ' ';
	values[8] = PG_GETARG_DATUM(6);
	nulls[8] = PG_ARGISNULL(6) ? 'n' : ' ';

	SPI_connect();
	ret = SPI_execute_plan(outbox_plan(ext, &set_plan), values, nulls, false, 0);
	if (ret < 0)
		elog(ERROR, "outbox statement failed: %s", SPI_result_code_string(ret));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * outbox_reset_topic(pattern text) RETURNS boolean
 *
 * Remove the settings of pattern; false if it had none.
 */
Datum
outbox_reset_topic(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Datum		value = PG_GETARG_DATUM(0);
	uint64		removed;

	check_rights();
	SPI_connect();
	removed = outbox_run(ext, &reset_plan, &value, -1);
	SPI_finish();
	PG_RETURN_BOOL(removed > 0);
}

/*
 * outbox_topic(topic text, OUT pattern text, OUT brokers text,
 *				OUT properties_file text, OUT format text,
 *				OUT value_schema_id integer, OUT key_schema_id integer,
 *				OUT cloudevents_source text) RETURNS record
 *
 * The settings a topic's events are published with: the pattern whose row
 * it takes (NULL if none), the brokers and properties file, the outbox.*
 * settings where the row leaves them NULL, and the row's format.
 */
Datum
outbox_topic(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	const OutboxTopicSetting *setting;
	const OutboxCluster *cluster;
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {true, false, false, true, true, true, true};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	setting = outbox_topic_setting(outbox_topic_settings_load(ext),
								   text_to_cstring(PG_GETARG_TEXT_PP(0)));
	cluster = setting ? &setting->cluster : NULL;
	values[1] = CStringGetTextDatum(outbox_cluster_brokers(cluster));
	values[2] = CStringGetTextDatum(outbox_cluster_properties_file(cluster));
	if (setting != NULL)
	{
		const char *format = setting->format ? setting->format->name : NULL;

		values[0] = CStringGetTextDatum(setting->pattern);
		nulls[0] = false;
		if (format != NULL)
		{
			values[3] = CStringGetTextDatum(format);
			nulls[3] = false;
		}
		values[4] = Int32GetDatum(setting->value_schema_id);
		nulls[4] = setting->value_schema_id == 0;
		values[5] = Int32GetDatum(setting->key_schema_id);
		nulls[5] = setting->key_schema_id == 0;
		if (setting->cloudevents_source != NULL)
		{
			values[6] = CStringGetTextDatum(setting->cloudevents_source);
			nulls[6] = false;
		}
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
