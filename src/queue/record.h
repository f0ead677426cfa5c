/*-------------------------------------------------------------------------
 *
 * record.h
 *		Recording what became of claimed events.
 *
 * src/queue/record.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_RECORD_H
#define OUTBOX_RECORD_H

#include "utils/hsearch.h"

#include "base/catalog.h"
#include "base/event.h"

/* what happens to a refused event: backoff, last attempt, dead letters */
typedef struct OutboxRetryPolicy
{
	int			max_attempts;
	double		base_delay_ms;
	double		max_delay_ms;
	double		jitter;
	const char *dead_letter_topic;	/* empty for none */
} OutboxRetryPolicy;

extern OutboxRetryPolicy outbox_retry_policy(void);
extern void outbox_record_outcomes(const OutboxExtension *ext, OutboxBatch *batch,
								   bool keep, const OutboxRetryPolicy *policy,
								   HTAB *stats);
extern void outbox_record_late(const OutboxExtension *ext, OutboxBatch *batch,
							   bool keep, const OutboxRetryPolicy *policy,
							   HTAB *stats);

#endif							/* OUTBOX_RECORD_H */
