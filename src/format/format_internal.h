/*-------------------------------------------------------------------------
 *
 * format_internal.h
 *		What a format is to src/format/format.c, which calls it: the
 *		functions of each step of an event's bytes.  Each format is one file
 *		of src/format/ that defines one OutboxFormat; format.c lists them.
 *		docs/design.md, "Formats", says what each does.
 *
 * src/format/format_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_FORMAT_INTERNAL_H
#define OUTBOX_FORMAT_INTERNAL_H

#include "access/htup.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

#include "base/catalog.h"
#include "base/event.h"
#include "format/change.h"

struct OutboxTopicSetting;

/* the settings of outbox_set_topic that belong to a format */
#define FORMAT_SCHEMAS		0x01	/* value_schema, key_schema */
#define FORMAT_SOURCE		0x02	/* cloudevents_source */

/*
 * A format: what it does at each step of an event's bytes, NULL where it
 * does nothing (format.c says what happens then).  A format of topics
 * (outbox_set_topic(..., format => name)) fills the first part; a format
 * of captured changes (outbox_attach(..., format => name)) the second.
 */
typedef struct OutboxFormat
{
	const char *name;

	/* -- the records of a topic -- */

	/* the settings of outbox_set_topic it takes, FORMAT_* */
	int			settings;

	/*
	 * outbox_set_topic: check setting (those of other formats are refused
	 * already) and complete it (avro: its schemas registered, their ids).
	 */
	void		(*check_topic) (struct OutboxTopicSetting *setting);

	/*
	 * Enqueue: the payload stored for the one outbox_enqueue is given, a
	 * value of type type (isnull: a tombstone), and its key checked; *json
	 * says whether what is stored is JSON text.  NULL: as given (the outbox
	 * format's).
	 */
	bytea	   *(*encode) (const struct OutboxTopicSetting *setting, text *key,
						   Datum payload, bool isnull, Oid type, bool *json);

	/*
	 * Enqueue, for every event a topic gets (outbox_enqueue, a capture, a
	 * router): refuse what the format cannot publish.  ev holds the event's
	 * key and headers, unpacked; *headers (the stored ones) may get the
	 * format's.  Returns the bytes the format adds at publish, which count
	 * against outbox.max_message_bytes.
	 */
	int			(*check_event) (const struct OutboxTopicSetting *setting,
								const char *topic, const OutboxEvent *ev,
								bool payload, bool json, Jsonb **headers);

	/*
	 * Publish: the record from the stored event, in the worker's
	 * transaction: its key and headers (avro: the key encoded;
	 * cloudevents: the ce_* headers).  Called for each event in flight; an
	 * event it cannot make a record of is refused for good, never an
	 * error.  A format of captured changes would build here the value of a
	 * change stored compactly at capture (none does yet: each builds it at
	 * capture, in change below).
	 */
	void		(*prepare) (const struct OutboxTopicSetting *setting, OutboxEvent *ev);

	/* -- captured changes -- */

	/*
	 * outbox_attach: the format's options among its arguments (after
	 * snapshot), into config->options; an error for those it does not take.
	 */
	void		(*attach_options) (FunctionCallInfo fcinfo, CaptureConfig *config);

	/*
	 * The capture trigger's keyword arguments that are the format's (not
	 * format, topic, key), into config->options: the first it does not
	 * know, or NULL.  NULL: the format takes none.
	 */
	const char *(*read_args) (CaptureConfig *config, List *args);

	/* The trigger arguments that say config->options, appended to args. */
	List	   *(*write_args) (const CaptureConfig *config, List *args);

	/* The topic of table's events (NULL: config->topic). */
	char	   *(*topic) (const CaptureConfig *config, const char *schema,
						  const char *table);

	/* outbox_attach, once the table rel is attached. */
	void		(*attached) (const OutboxExtension *ext, const CaptureConfig *config,
							 Relation rel);

	/*
	 * The events (OutboxDraft) of a change of a row of table, in the
	 * application's transaction: op c (after), u (before and after), d
	 * (before), t (neither) or r (after, read by a snapshot: "first",
	 * "true" or "last").
	 */
	List	   *(*change) (const OutboxExtension *ext, const CaptureConfig *config,
						   const CaptureTable *table, char op, HeapTuple before,
						   HeapTuple after, const char *snapshot);
} OutboxFormat;

/* the formats, each of its own file */
extern const OutboxFormat outbox_outbox_format;
extern const OutboxFormat outbox_avro_format;
extern const OutboxFormat outbox_cloudevents_format;
extern const OutboxFormat outbox_debezium_format;

extern const OutboxFormat *outbox_format_named(const char *name, bool of_topics);
extern char *outbox_format_names(bool of_topics, bool quoted);
extern void outbox_format_check_topic(struct OutboxTopicSetting *setting);
extern void outbox_format_conflict(const struct OutboxTopicSetting *setting, const char *detail);
extern bool outbox_keyword_arg(const char *arg, const char *name, const char **value);

#endif							/* OUTBOX_FORMAT_INTERNAL_H */
