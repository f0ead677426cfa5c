/*-------------------------------------------------------------------------
 *
 * retries.h
 *		The retry table, and the claimed events not yet recorded.
 *
 * src/queue/retries.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_RETRIES_H
#define OUTBOX_RETRIES_H

#include "base/catalog.h"
#include "base/event.h"

extern void outbox_count_unrecorded(int64 n);
extern void outbox_claimed_keep(OutboxBatch *batch);
extern OutboxEvent *outbox_claimed_event(int64 id, bool forget);
extern OutboxBatch *outbox_claimed_batch(void);
extern bool outbox_retries_hold(const OutboxExtension *ext, const char *index,
								int64 first, int64 last);
extern int	outbox_retries_claim(const OutboxExtension *ext, int room, Datum in_flight,
								 Datum held, int64 *bytes_left, OutboxEvent *events,
								 MemoryContext cxt);
extern int	outbox_copy_to_retries(const OutboxExtension *ext,
								   OutboxEvent **events, int n);
extern int	outbox_retries_hold_back(const OutboxExtension *ext, OutboxEvent *events,
									 int n, bool *held_back);
extern void outbox_send_dead_letters(const OutboxExtension *ext, Datum ids,
									 const char *topic);
extern int64 outbox_retries_abandon(const OutboxExtension *ext, Datum id, bool all,
									const char *error, const char *dead_letter_topic);

#endif							/* OUTBOX_RETRIES_H */
