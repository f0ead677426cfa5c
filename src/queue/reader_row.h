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

#include "storage/itemptr.h"
#include "utils/snapshot.h"

#include "base/catalog.h"
#include "queue/reader.h"

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

#endif							/* OUTBOX_READER_ROW_H */
