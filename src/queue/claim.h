/*-------------------------------------------------------------------------
 *
 * claim.h
 *		Claiming due events for a batch, and the lock that serialises the
 *		claim with what moves events between the log and the retry table.
 *
 * src/queue/claim.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CLAIM_H
#define OUTBOX_CLAIM_H

#include "base/catalog.h"
#include "base/event.h"
#include "queue/reader.h"
#include "queue/reader_row.h"

/*
 * A batch's payloads are held twice at once (the claimed rows,
 * librdkafka's copies): bound them.
 */
#define OUTBOX_BATCH_MAX_BYTES (16 * 1024 * 1024)

extern bool outbox_lock_reader(const OutboxExtension *ext, bool wait,
							   OutboxReaderRow *row);
extern void outbox_save_reader(const OutboxExtension *ext, OutboxReaderRow *row,
							   int nread);
extern void outbox_write_reader(const OutboxExtension *ext, OutboxReaderRow *row);
extern OutboxBatch *outbox_claim_batch(const OutboxExtension *ext,
									   int batch_size, int64 max_bytes,
									   const OutboxBatch *in_flight, List *held);
extern bool outbox_events_due(const OutboxExtension *ext);
extern bool outbox_events_undelivered(const OutboxExtension *ext);

#endif							/* OUTBOX_CLAIM_H */
