/*-------------------------------------------------------------------------
 *
 * claim.h
 *		Claiming due events for a batch, and the lock that serialises the
 *		claim with what moves events between the log and the retry table.
 *
 * src/claim.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CLAIM_H
#define OUTBOX_CLAIM_H

#include "catalog.h"
#include "event.h"
#include "reader.h"

/*
 * A batch's payloads are held twice at once (the claimed rows,
 * librdkafka's copies): bound them.
 */
#define OUTBOX_BATCH_MAX_BYTES (16 * 1024 * 1024)

/* the reader row's columns beside the claim's position */
typedef struct OutboxReaderRow
{
	OutboxReader reader;
	int			current_log;	/* the log table enqueue writes to */
	TimestampTz current_since;
} OutboxReaderRow;

extern bool outbox_lock_reader(const OutboxExtension *ext, bool wait,
							   OutboxReaderRow *row);
extern void outbox_save_reader(const OutboxExtension *ext, OutboxReader *reader,
							   int nread);
extern OutboxBatch *outbox_claim_batch(const OutboxExtension *ext,
									   int batch_size, int64 max_bytes);
extern int	outbox_copy_to_retries(const OutboxExtension *ext,
								   OutboxEvent **events, int n);
extern bool outbox_events_due(const OutboxExtension *ext);

#endif							/* OUTBOX_CLAIM_H */
