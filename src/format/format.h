/*-------------------------------------------------------------------------
 *
 * format.h
 *		The formats of records: what decides the bytes of an event, from
 *		what an application or a captured change gives to what a Kafka
 *		record carries.  Enqueue, capture and the worker call these, and
 *		name no format; src/format/format.c calls the format of the topic,
 *		or of the capture.
 *
 * src/format/format.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_FORMAT_H
#define OUTBOX_FORMAT_H

#include "access/htup.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

#include "base/catalog.h"
#include "base/event.h"
#include "format/change.h"

struct OutboxTopicSetting;

/*
 * An event as a format makes it, for enqueue to store: a new event_id,
 * the start of the transaction as its time.
 */
typedef struct OutboxDraft
{
	text	   *topic;
	text	   *key;			/* NULL: none */
	bytea	   *payload;		/* NULL: a tombstone */
	Jsonb	   *headers;		/* NULL: none */
	bool		json;			/* the payload is JSON text */
} OutboxDraft;

/* enqueue, for the topic's setting (NULL: none) */
extern bytea *outbox_format_encode(const struct OutboxTopicSetting *setting, text *key,
								   Datum payload, bool isnull, Oid type, bool *json);
extern int	outbox_format_check_event(const struct OutboxTopicSetting *setting,
									  const char *topic, const OutboxEvent *ev,
									  bool payload, bool json, Jsonb **headers);

/* publish */
extern void outbox_format_prepare(const struct OutboxTopicSetting *setting,
								  OutboxEvent *ev);

/* captured changes */
extern void outbox_format_capture(const char *name, CaptureConfig *config);
extern void outbox_capture_config(int nargs, char **args, CaptureConfig *config);
extern char **outbox_capture_args(const CaptureConfig *config, int *nargs);
extern void outbox_format_attach_options(FunctionCallInfo fcinfo, CaptureConfig *config);
extern char *outbox_format_capture_topic(const CaptureConfig *config, const char *schema,
										 const char *table);
extern void outbox_format_attached(const OutboxExtension *ext, const CaptureConfig *config,
								   Relation rel);
extern List *outbox_format_change(const OutboxExtension *ext, const CaptureConfig *config,
								  const CaptureTable *table, char op, HeapTuple before,
								  HeapTuple after, const char *snapshot);

#endif							/* OUTBOX_FORMAT_H */
