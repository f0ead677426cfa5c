/*-------------------------------------------------------------------------
 *
 * event.h
 *		One event from the moment it is read from the log to the recording of
 *		its outcome: the row as stored, its parts as they go on the wire, and
 *		what Kafka said of it.
 *
 * src/base/event.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_EVENT_H
#define OUTBOX_EVENT_H

#include "access/tupdesc.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/*
 * Room for a topic name as a C string: Kafka's names have at most 249
 * characters, all ASCII (event.c checks them)
 */
#define OUTBOX_TOPIC_SIZE 256

/* the ring of log tables, outbox_log_0 .. 3 */
#define OUTBOX_LOG_TABLES 4

/* the columns of the log tables, in order */
typedef enum OutboxLogColumn
{
	LOG_ID,
	LOG_TXID,
	LOG_EVENT_ID,
	LOG_TOPIC,
	LOG_KEY,
	LOG_PAYLOAD,
	LOG_HEADERS,
	LOG_CREATED_AT,
	OUTBOX_LOG_COLUMNS
} OutboxLogColumn;

extern const char *const outbox_log_column_names[OUTBOX_LOG_COLUMNS];

/* what became of a claimed event */
typedef enum OutboxOutcome
{
	OUTBOX_IN_FLIGHT,			/* no delivery report yet */
	OUTBOX_DELIVERED,			/* acknowledged by the cluster */
	OUTBOX_REFUSED,				/* failed: counts as an attempt */
	OUTBOX_RELEASED,			/* not sent (outage, shutdown): no attempt */
	OUTBOX_HANDED_OFF			/* sent, its report late: due again at due_at
								 * unless the report comes first */
} OutboxOutcome;

#define UUID_TEXT_LEN 36

/*
 * Bytes that a Kafka record header costs beside its name and value: two
 * varint lengths, at most 5 bytes each.
 */
#define OUTBOX_HEADER_OVERHEAD 10

/*
 * A header of a stored event that is not published: its key is the base64
 * of bytes (a binary key, such as Avro's), published as those bytes.
 */
#define OUTBOX_KEY_BASE64_HEADER "outbox.key_base64"

typedef struct OutboxEvent
{
	/* the row as stored, detoasted; txid is null for the retry table's */
	Datum		values[OUTBOX_LOG_COLUMNS];
	bool		isnull[OUTBOX_LOG_COLUMNS];
	int64		id;
	bool		from_log;		/* not from the retry table */
	TimestampTz created_at;
	int64		bytes;			/* payload, key and headers, as stored */

	/* on the wire, set by outbox_event_unpack: UTF-8 */
	char		event_id[UUID_TEXT_LEN + 1];
	char	   *topic;
	char	   *key;			/* NULL: no key; key_len bytes, no NUL */
	int			key_len;
	bool		key_base64;		/* the stored key is base64 (the header says) */
	char	   *payload;		/* NULL: tombstone */
	int			payload_len;
	int			nheaders;
	char	  **header_names;
	char	  **header_values;
	int			headers_bytes;	/* names, values and their framing */

	/* the outcome */
	OutboxOutcome outcome;
	int32		partition;
	int64		offset;
	const char *error;			/* why it was refused */
	bool		permanent;		/* retrying cannot help */
	TimestampTz due_at;			/* handed off: when it is due again */
} OutboxEvent;

typedef struct OutboxBatch
{
	int			count;
	OutboxEvent *events;
	bool		full;			/* the claim stopped at its limits */
	bool		held_back;		/* it moved log events to the retry table */
} OutboxBatch;

extern const char *outbox_topic_problem(const char *topic, int len);
extern bool outbox_json_too_deep(const char *json, int max_depth);
extern char *outbox_to_utf8(const char *str, int len, int *utf8_len);
extern void outbox_refuse_not_utf8(const char *what);
extern bytea *outbox_utf8_payload(text *t);
extern const char *outbox_unpack_headers(Jsonb *headers, OutboxEvent *ev,
										 bool *not_utf8);
extern const char *outbox_decode_key(OutboxEvent *ev);
extern int64 outbox_record_bytes(const OutboxEvent *ev);
extern void outbox_event_store(OutboxEvent *ev, TupleDesc desc,
							   Datum *values, bool *isnull);
extern void outbox_event_unpack(OutboxEvent *ev, const OutboxEvent *previous);

#endif							/* OUTBOX_EVENT_H */
