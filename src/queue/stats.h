/*-------------------------------------------------------------------------
 *
 * stats.h
 *		Delivery statistics per topic and 10-second bucket, summed in
 *		memory and written to outbox_publish_stats.
 *
 * src/queue/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_STATS_H
#define OUTBOX_STATS_H

#include "utils/hsearch.h"

#include "base/catalog.h"

/* what happened to one event, for the statistics */
typedef enum OutboxStatsOutcome
{
	OUTBOX_STATS_PUBLISHED,
	OUTBOX_STATS_FAILED,
	OUTBOX_STATS_ABANDONED
} OutboxStatsOutcome;

extern HTAB *outbox_stats_create(MemoryContext cxt);
extern void outbox_stats_add(HTAB *stats, Datum topic, OutboxStatsOutcome outcome,
							 TimestampTz created_at, TimestampTz now);
extern void outbox_stats_write(const OutboxExtension *ext, HTAB *stats);
extern void outbox_stats_begin(MemoryContext cxt);
extern HTAB *outbox_stats_current(void);
extern void outbox_stats_write_due(const OutboxExtension *ext, bool now);
extern void outbox_stats_committed(void);

#endif							/* OUTBOX_STATS_H */
