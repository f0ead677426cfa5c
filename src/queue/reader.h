/*-------------------------------------------------------------------------
 *
 * reader.h
 *		Reading the event log in id order, with index scans.
 *
 * src/queue/reader.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_READER_H
#define OUTBOX_READER_H

#include "access/transam.h"
#include "utils/snapshot.h"

#include "base/catalog.h"
#include "base/event.h"
#include "queue/reader_row.h"

extern int	outbox_read_log(const OutboxExtension *ext, OutboxReader *reader,
							int room, int64 *bytes_left, OutboxEvent *events);
extern bool outbox_log_has_after(const OutboxExtension *ext, int64 after);
extern int	outbox_log_events(const OutboxExtension *ext, Datum ids,
							  OutboxEvent **events);
extern bool outbox_log_table_range(const OutboxExtension *ext, int t,
								   Snapshot snapshot, int64 *first_id,
								   int64 *last_id);
extern bool outbox_log_table_holds(const OutboxExtension *ext, int t,
								   Snapshot snapshot, FullTransactionId *xids,
								   int n);
extern int64 outbox_count_unread(const OutboxExtension *ext);

#endif							/* OUTBOX_READER_H */
