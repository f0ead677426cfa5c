/*-------------------------------------------------------------------------
 *
 * format.c
 *		The formats, by name, and the calls of each step of an event's
 *		bytes: the format of a topic (its setting, NULL: the payload as
 *		given) at enqueue and at publish; the format of a capture (its
 *		trigger's arguments) when a table is attached and at each change.
 *		What each format does is in its own file (format_internal.h lists
 *		the steps); docs/design.md, "Formats", says where a new one goes.
 *
 * src/format/format.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "format/format.h"
#include "format/format_internal.h"
#include "format/topics.h"

/* every format, in the order messages list them */
static const OutboxFormat *const formats[] = {
	&outbox_outbox_format,
	&outbox_debezium_format,
	&outbox_avro_format,
	&outbox_cloudevents_format
};

/* Is format one of topics (outbox_set_topic), or else of captured changes? */
static bool
is_of(const OutboxFormat *format, bool of_topics)
{
	return of_topics ? format->check_topic != NULL : format->change != NULL;
}

/*
 * The format of topics (of_topics) or of captured changes called name, or
 * NULL if there is none.
 */
const OutboxFormat *
outbox_format_named(const char *name, bool of_topics)
{
	for (int i = 0; i < lengthof(formats); i++)
		if (is_of(formats[i], of_topics) && strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

/*
 * The names of the formats of topics (of_topics) or of captured changes,
 * for a message: "a, b and c", each in double quotes if quoted.
 */
char *
outbox_format_names(bool of_topics, bool quoted)
{
	StringInfoData buf;
	int			count = 0;
	int			n = 0;

	for (int i = 0; i < lengthof(formats); i++)
		count += is_of(formats[i], of_topics);
	initStringInfo(&buf);
	for (int i = 0; i < lengthof(formats); i++)
	{
		if (!is_of(formats[i], of_topics))
			continue;
		appendStringInfo(&buf, n == 0 ? "" : n == count - 1 ? " and " : ", ");
		appendStringInfo(&buf, quoted ? "\"%s\"" : "%s", formats[i]->name);
		n++;
	}
	return buf.data;
}

/*
 * Is arg "name=value"?  Then *value points at value.
 */
bool
outbox_keyword_arg(const char *arg, const char *name, const char **value)
{
	size_t		len = strlen(name);

	if (strncmp(arg, name, len) != 0 || arg[len] != '=')
		return false;
	*value = arg + len + 1;
	return true;
}

/* the format of the records of a topic with setting (NULL: none) */
static const OutboxFormat *
topic_format(const OutboxTopicSetting *setting)
{
	return setting != NULL && setting->format != NULL ? setting->format :
		&outbox_outbox_format;
}

/*
 * The payload to store for the one given to outbox_enqueue (a value of
 * type type; isnull: a tombstone) on a topic with setting (NULL: none),
 * and its key checked, as the topic's format says; *json says whether
 * what is stored is JSON text.
 */
bytea *
outbox_format_encode(const OutboxTopicSetting *setting, text *key, Datum payload,
					 bool isnull, Oid type, bool *json)
{
	const OutboxFormat *format = topic_format(setting);

	if (format->encode == NULL)
		format = &outbox_outbox_format;
	return format->encode(setting, key, payload, isnull, type, json);
}

/*
 * Refuse an event of topic (with setting, NULL: none) that its format
 * cannot publish; ev has its key and headers unpacked, payload says it is
 * no tombstone and json that it is JSON text.  *headers, those to store,
 * may get the format's.  Returns the bytes the format adds at publish.
 */
int
outbox_format_check_event(const OutboxTopicSetting *setting, const char *topic,
						  const OutboxEvent *ev, bool payload, bool json, Jsonb **headers)
{
	const OutboxFormat *format = topic_format(setting);

	if (format->check_event == NULL)
		return 0;
	return format->check_event(setting, topic, ev, payload, json, headers);
}

/*
 * Make the record of ev, an event in flight of a topic with setting
 * (NULL: none), as its format says; see OutboxFormat.prepare.
 */
void
outbox_format_prepare(const OutboxTopicSetting *setting, OutboxEvent *ev)
{
	const OutboxFormat *format = topic_format(setting);

	if (format->prepare != NULL)
		format->prepare(setting, ev);
}

/*
 * Refuse setting, as outbox_set_topic is given it, for the reason detail
 * (a sentence).
 */
void
outbox_format_conflict(const OutboxTopicSetting *setting, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("conflicting settings for topic pattern \"%s\"", setting->pattern),
			 errdetail("%s", detail)));
}

/*
 * Refuse the settings of outbox_set_topic which (FORMAT_*) if given and
 * not of setting's format, naming the formats they are of; what says
 * what they are ("cloudevents_source is a setting").
 */
static void
refuse_others(const OutboxTopicSetting *setting, int which, bool given, const char *what)
{
	StringInfoData owners;
	int			n = 0;

	if (!given || (topic_format(setting)->settings & which) != 0)
		return;
	initStringInfo(&owners);
	for (int i = 0; i < lengthof(formats); i++)
	{
		if ((formats[i]->settings & which) == 0)
			continue;
		appendStringInfo(&owners, "%s%s", n > 0 ? " and " : "", formats[i]->name);
		n++;
	}
	outbox_format_conflict(setting, psprintf("%s of format%s %s.", what, n > 1 ? "s" : "",
											 owners.data));
}

/*
 * Check a topic's setting as outbox_set_topic is given it: no setting of
 * another format, then what its format checks (and completes).
 */
void
outbox_format_check_topic(OutboxTopicSetting *setting)
{
	refuse_others(setting, FORMAT_SCHEMAS,
				  setting->value_schema != NULL || setting->key_schema != NULL,
				  "value_schema and key_schema are settings");
	refuse_others(setting, FORMAT_SOURCE, setting->cloudevents_source != NULL,
				  "cloudevents_source is a setting");
	if (setting->format != NULL)
		setting->format->check_topic(setting);
}

/*
 * Set config's format to the format of captured changes called name (as
 * outbox_attach takes it); an error if there is none.
 */
void
outbox_format_capture(const char *name, CaptureConfig *config)
{
	config->format = outbox_format_named(name, false);
	if (config->format == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown format \"%s\"", name),
				 errdetail("The formats are %s.", outbox_format_names(false, true)),
				 errhint("An outbox table in the shape that Debezium's outbox event router reads is attached with outbox_attach_router().")));
}

/*
 * The configuration of a captured table from its trigger's arguments:
 * (topic [, key_column ...]) for the outbox format (1.0's), keywords
 * (format=..., topic=..., key=..., then the format's own) otherwise; "="
 * cannot be in a topic name, so the two do not mix.  Bad arguments are an
 * error.
 */
void
outbox_capture_config(int nargs, char **args, CaptureConfig *config)
{
	const char *value;
	List	   *own = NIL;
	const char *unknown = NULL;

	memset(config, 0, sizeof(*config));
	if (nargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no topic given"),
				 errdetail("The trigger's first argument is the topic."),
				 errhint("Use outbox_attach() to create the trigger.")));
	if (!outbox_keyword_arg(args[0], "format", &value))
	{
		config->format = &outbox_outbox_format;
		config->topic = args[0];
		config->nkeys = nargs - 1;
		config->keys = args + 1;
		return;
	}

	config->format = outbox_format_named(value, false);
	if (config->format == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown format \"%s\"", value),
				 errhint("Use outbox_attach() to create the trigger.")));
	config->keys = palloc(nargs * sizeof(char *));
	for (int i = 1; i < nargs; i++)
	{
		if (outbox_keyword_arg(args[i], "topic", &value))
			config->topic = (char *) value;
		else if (outbox_keyword_arg(args[i], "key", &value))
			config->keys[config->nkeys++] = (char *) value;
		else
			own = lappend(own, args[i]);
	}
	if (config->format->read_args != NULL)
		unknown = config->format->read_args(config, own);
	else if (own != NIL)
		unknown = linitial(own);
	if (unknown != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown argument \"%s\"", unknown),
				 errhint("Use outbox_attach() to create the trigger.")));
	if (config->topic == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no topic given"),
				 errdetail("The trigger's arguments name no topic."),
				 errhint("Use outbox_attach() to create the trigger.")));
}

/*
 * The trigger arguments that say config (the inverse of
 * outbox_capture_config); palloc'd.
 */
char	  **
outbox_capture_args(const CaptureConfig *config, int *nargs)
{
	List	   *args = NIL;
	char	  **result;
	ListCell   *lc;

	if (config->format == &outbox_outbox_format)
	{
		args = lappend(args, config->topic);
		for (int i = 0; i < config->nkeys; i++)
			args = lappend(args, config->keys[i]);
	}
	else
	{
		args = lappend(args, psprintf("format=%s", config->format->name));
		args = lappend(args, psprintf("topic=%s", config->topic));
		if (config->format->write_args != NULL)
			args = config->format->write_args(config, args);
		for (int i = 0; i < config->nkeys; i++)
			args = lappend(args, psprintf("key=%s", config->keys[i]));
	}
	result = palloc(sizeof(char *) * (list_length(args) + 1));
	foreach(lc, args)
		result[foreach_current_index(lc)] = lfirst(lc);
	*nargs = list_length(args);
	return result;
}

/*
 * The options of config's format among outbox_attach's arguments, into
 * config; see OutboxFormat.attach_options.
 */
void
outbox_format_attach_options(FunctionCallInfo fcinfo, CaptureConfig *config)
{
	if (config->format->attach_options != NULL)
		config->format->attach_options(fcinfo, config);
}

/*
 * The topic of the events of a table (named schema.table) captured with
 * config.
 */
char *
outbox_format_capture_topic(const CaptureConfig *config, const char *schema,
							const char *table)
{
	if (config->format->topic == NULL)
		return config->topic;
	return config->format->topic(config, schema, table);
}

/*
 * What config's format does once outbox_attach has attached rel.
 */
void
outbox_format_attached(const OutboxExtension *ext, const CaptureConfig *config,
					   Relation rel)
{
	if (config->format->attached != NULL)
		config->format->attached(ext, config, rel);
}

/*
 * The events (OutboxDraft) of a change of a row of table captured with
 * config, for the caller to store; see OutboxFormat.change.
 */
List *
outbox_format_change(const OutboxExtension *ext, const CaptureConfig *config,
					 const CaptureTable *table, char op, HeapTuple before,
					 HeapTuple after, const char *snapshot)
{
	return config->format->change(ext, config, table, op, before, after, snapshot);
}
