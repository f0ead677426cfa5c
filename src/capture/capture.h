/*-------------------------------------------------------------------------
 *
 * capture.h
 *		Row changes as events: the configuration of a captured table (the
 *		capture trigger's arguments) and the events of one row, which the
 *		capture trigger and the snapshot both build.
 *
 * src/capture/capture.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CAPTURE_H
#define OUTBOX_CAPTURE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "utils/relcache.h"

#include "base/catalog.h"
#include "format/debezium_json.h"

/* the names of the triggers that outbox_attach and outbox_attach_router create */
#define CAPTURE_TRIGGER "outbox_capture"
#define CAPTURE_TRUNCATE_TRIGGER "outbox_capture_truncate"
#define ROUTER_TRIGGER "outbox_router"

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
extern void outbox_capture_table(const CaptureConfig *config, Relation rel,
								 TupleDesc tupdesc, CaptureTable *table);
extern void outbox_capture_event(const OutboxExtension *ext, const CaptureConfig *config,
								 const CaptureTable *table, char op,
								 HeapTuple before, HeapTuple after,
								 const char *snapshot);
extern char **outbox_trigger_args(const OutboxExtension *ext, Relation rel,
								  const char *name, int *nargs);
extern bool outbox_has_trigger(const OutboxExtension *ext, Relation rel,
							   const char *name);
extern Relation outbox_open_to_attach(Oid relid);
extern void outbox_note_attachment(const OutboxExtension *ext, Oid relid, bool attached);
extern char **outbox_primary_key(Relation rel, int *nkeys);
extern void outbox_trigger_error_context(void *arg);
extern void outbox_capture_debezium_settings(FunctionCallInfo fcinfo, CaptureConfig *config);
extern void outbox_capture_register_avro(const OutboxExtension *ext,
										 const CaptureConfig *config, Relation rel);

#endif							/* OUTBOX_CAPTURE_H */
