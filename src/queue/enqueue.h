/*-------------------------------------------------------------------------
 *
 * enqueue.h
 *		Storing an event in the caller's transaction.
 *
 * src/queue/enqueue.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_ENQUEUE_H
#define OUTBOX_ENQUEUE_H

#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/catalog.h"

extern void outbox_check_topic(const char *topic, int len);
extern bool outbox_store_event(const OutboxExtension *ext, text *topic, text *key,
							   bytea *payload, Jsonb *headers,
							   Datum event_id, bool event_id_isnull,
							   const TimestampTz *created_at, bool json);

#endif							/* OUTBOX_ENQUEUE_H */
