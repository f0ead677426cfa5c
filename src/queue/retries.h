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

/* the claimed events not yet recorded */
extern void outbox_count_unrecorded(int64 n);
extern void outbox_claimed_keep(OutboxBatch *batch);
extern OutboxEvent *outbox_claimed_event(int64 id, bool forget);
extern OutboxBatch *outbox_claimed_batch(void);

/* the claim */
extern bool outbox_retries_unfinished(const OutboxExtension *ext);
extern bool outbox_retries_between(const OutboxExtension *ext, int64 first, int64 last);
extern bool outbox_retries_due(const OutboxExtension *ext);
extern int	outbox_retries_claim(const OutboxExtension *ext, int room, Datum in_flight,
								 Datum held, int64 *bytes_left, OutboxEvent *events,
								 MemoryContext cxt);
extern int	outbox_retries_copy(const OutboxExtension *ext, OutboxEvent **events, int n);
extern int	outbox_retries_hold_back(const OutboxExtension *ext, OutboxEvent *events,
									 int n, bool *held_back);

/* the outcomes */
extern void outbox_retries_published(const OutboxExtension *ext, Datum ids,
									 Datum partitions, Datum offsets, bool keep);
extern int32 *outbox_retries_charge(const OutboxExtension *ext, Datum ids, Datum errors,
									int n);
extern void outbox_retries_refused(const OutboxExtension *ext, Datum ids,
								   Datum abandoned, Datum next_attempts);
extern int64 outbox_retries_dead_letters(const OutboxExtension *ext, Datum ids,
										 const char *topic);
extern int	outbox_retries_fetch(const OutboxExtension *ext, Datum ids,
								 OutboxEvent *events, MemoryContext cxt);
extern void outbox_retries_handed_off(const OutboxExtension *ext, Datum ids, Datum dues);
extern bool *outbox_retries_still_handed_off(const OutboxExtension *ext, Datum ids,
											 Datum dues, int n);

/* the retention */
extern int64 outbox_retries_purge(const OutboxExtension *ext, Datum published_retention,
								  Datum abandoned_retention, Datum batch_size);
extern int64 outbox_retries_first_id(const OutboxExtension *ext);

/* the operator's */
extern int64 outbox_retries_undelivered(const OutboxExtension *ext);
extern int64 outbox_retries_retry(const OutboxExtension *ext, Datum id);
extern int64 outbox_retries_retry_abandoned(const OutboxExtension *ext, Datum topic,
											bool all);
extern int64 outbox_retries_abandon(const OutboxExtension *ext, Datum id, bool all,
									const char *error, const char *dead_letter_topic);

#endif							/* OUTBOX_RETRIES_H */
