/*-------------------------------------------------------------------------
 *
 * change.h
 *		Row changes as the formats of their events see them: the options of
 *		a captured table (its capture trigger's arguments), and the table
 *		as its events name it.
 *
 * src/format/change.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CHANGE_H
#define OUTBOX_CHANGE_H

#include "access/tupdesc.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "utils/relcache.h"

#include "format/debezium_json.h"

typedef enum CaptureFormat
{
	CAPTURE_FORMAT_OUTBOX,		/* the extension's own envelope */
	CAPTURE_FORMAT_DEBEZIUM		/* the Debezium connector's change events */
} CaptureFormat;

/* what the capture trigger's arguments say */
typedef struct CaptureConfig
{
	CaptureFormat format;
	char	   *topic;			/* the topic; debezium: the prefix of one per table */
	/* debezium: the connector's settings */
	bool		tombstones;		/* tombstones.on.delete */
	char		skipped[5];		/* skipped.operations: of c, u, d, t */
	DebeziumOptions options;	/* decimal.handling.mode, the converter and
								 * the like */
	bool		by_identity;	/* before and TOASTed values as REPLICA IDENTITY
								 * has them; false for a 1.2 trigger: whole rows */
	int			nkeys;			/* key columns named; 0: the primary key */
	char	  **keys;
} CaptureConfig;

/* a table as its events name it, and where its key columns are */
typedef struct CaptureTable
{
	char	   *schema;
	char	   *table;
	TupleDesc	tupdesc;		/* of the rows given to outbox_capture_event */
	int			nkeys;			/* 0: no key */
	AttrNumber *key_attnums;	/* in tupdesc */
	char		identity;		/* the table's REPLICA IDENTITY */
	Bitmapset  *identity_attrs; /* its columns, less FirstLowInvalidHeapAttributeNumber */
} CaptureTable;

extern void outbox_capture_config(int nargs, char **args, CaptureConfig *config);
extern char **outbox_capture_args(const CaptureConfig *config, int *nargs);
extern void outbox_capture_debezium_settings(FunctionCallInfo fcinfo, CaptureConfig *config);
extern char **outbox_primary_key(Relation rel, int *nkeys);
extern void outbox_capture_table(const CaptureConfig *config, Relation rel,
								 TupleDesc tupdesc, CaptureTable *table);

#endif							/* OUTBOX_CHANGE_H */
