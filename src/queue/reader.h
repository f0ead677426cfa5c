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

/* where the claim is in the log: the row of table outbox_reader */
typedef struct OutboxReader
{
	int64		last_id;		/* the highest id read */
	FullTransactionId *running; /* may still commit ids <= last_id */
	int			nrunning;
	FullTransactionId *draining;	/* ended: their ids <= drain_upto ... */
	int			ndraining;
	int64		drain_upto;
	int64		drain_after;	/* ... past this one are being read */
} OutboxReader;

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
extern int	outbox_xids_of(Datum array, FullTransactionId **xids);
extern Datum outbox_xid_array(FullTransactionId *xids, int n);

#endif							/* OUTBOX_READER_H */
