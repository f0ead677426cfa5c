/*-------------------------------------------------------------------------
 *
 * change.h
 *		Row changes as the formats of their events see them: the options of
 *		a captured table (its capture trigger's arguments, read by
 *		src/format/format.c), and the table as its events name it.
 *
 * src/format/change.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CHANGE_H
#define OUTBOX_CHANGE_H

#include "access/tupdesc.h"
#include "nodes/bitmapset.h"
#include "utils/relcache.h"

struct OutboxFormat;

/* what the capture trigger's arguments say */
typedef struct CaptureConfig
{
	const struct OutboxFormat *format;
	char	   *topic;			/* the topic; debezium: the prefix of one per table */
	int			nkeys;			/* key columns named; 0: the primary key */
	char	  **keys;
	void	   *options;		/* the format's own: debezium, the connector's
								 * settings */
} CaptureConfig;

/* a table as its events name it, and where its key columns are */
typedef struct CaptureTable
{
	Oid			relid;
	char	   *schema;
	char	   *table;
	char	   *topic;			/* of its events, if known (outbox_format_capture_topic) */
	TupleDesc	tupdesc;		/* of the rows given to outbox_capture_event */
	int			nkeys;			/* 0: no key */
	AttrNumber *key_attnums;	/* in tupdesc */
	char		identity;		/* the table's REPLICA IDENTITY */
	Bitmapset  *identity_attrs; /* its columns, less FirstLowInvalidHeapAttributeNumber */
} CaptureTable;

extern char **outbox_primary_key(Relation rel, int *nkeys);
extern void outbox_capture_table(const CaptureConfig *config, Relation rel,
								 TupleDesc tupdesc, CaptureTable *table);

#endif							/* OUTBOX_CHANGE_H */
