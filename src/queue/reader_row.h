/*-------------------------------------------------------------------------
 *
 * reader_row.h
 *		The row of outbox_reader, read and written without SQL.
 *
 * src/queue/reader_row.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_READER_ROW_H
#define OUTBOX_READER_ROW_H

#include "access/transam.h"
#include "storage/itemptr.h"
#include "utils/snapshot.h"

#include "base/catalog.h"

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

/* the reader row: the claim's position, and the columns beside it */
typedef struct OutboxReaderRow
{
	OutboxReader reader;
	OutboxReader saved;			/* the position as stored */
	int			current_log;	/* the log table enqueue writes to */
	TimestampTz current_since;
	ItemPointerData tid;		/* where the row is */
} OutboxReaderRow;

extern void outbox_reader_row_read(const OutboxExtension *ext, Snapshot snapshot,
								   OutboxReaderRow *row);
extern void outbox_reader_row_write(const OutboxExtension *ext, OutboxReaderRow *row);
extern bool outbox_reader_moved(const OutboxReaderRow *row);
extern int	outbox_xids_of(Datum array, FullTransactionId **xids);
extern Datum outbox_xid_array(FullTransactionId *xids, int n);

#endif							/* OUTBOX_READER_ROW_H */
