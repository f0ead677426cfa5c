/*-------------------------------------------------------------------------
 *
 * format.h
 *		The formats of records: what decides the bytes of an event, from
 *		what an application or a captured change gives to what a Kafka
 *		record carries.
 *
 * src/format/format.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_FORMAT_H
#define OUTBOX_FORMAT_H

#include "utils/jsonb.h"

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

#endif							/* OUTBOX_FORMAT_H */
