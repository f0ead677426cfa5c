/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		The extension in the current database, as the catalogs say, and the
 *		saved plans of the statements run on its tables.
 *
 * src/base/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_CATALOG_H
#define OUTBOX_CATALOG_H

#include "executor/spi.h"
#include "storage/lockdefs.h"
#include "utils/inval.h"
#include "fmgr.h"

/* extension versions, as numbers that compare */
#define OUTBOX_VERSION(major, minor) ((major) * 100 + (minor))
/* the version of this library's scripts, and the oldest it serves */
#define OUTBOX_VERSION_CURRENT OUTBOX_VERSION(1, 4)
#define OUTBOX_VERSION_OLDEST OUTBOX_VERSION(1, 1)

typedef struct OutboxExtension
{
	Oid			oid;			/* InvalidOid: not installed */
	Oid			schema;
	Oid			owner;
	int			version;		/* 0: not a version this library knows */
	char		version_name[NAMEDATALEN];
} OutboxExtension;

extern void outbox_on_relation_change(RelcacheCallbackFunction fn);
extern bool outbox_extension_find(OutboxExtension *ext);
extern char *outbox_extension_problem(const OutboxExtension *ext);
extern void outbox_extension_check(const OutboxExtension *ext);
extern void outbox_check_schema(const OutboxExtension *ext);
extern const OutboxExtension *outbox_entry(FunctionCallInfo fcinfo);
extern Oid	outbox_relation(const OutboxExtension *ext, const char *name);
extern void outbox_require_read_committed(const char *function);
extern void outbox_lock_reader_table(const OutboxExtension *ext, LOCKMODE mode);

/*
 * A statement on the extension's tables, prepared and kept for the
 * session: sql names the schema as %1$s.  It may call only built-in
 * functions and operators: a role with CREATE on the extension's schema
 * could plant a closer overload of an extension function, or make a call
 * of one ambiguous.
 */
typedef struct OutboxPlan
{
	const char *sql;
	int			nargs;
	Oid			argtypes[12];
	SPIPlanPtr	plan;			/* for the schema below */
	Oid			schema;
	NameData	schema_name;
} OutboxPlan;

extern Datum outbox_array(Datum *values, bool *nulls, int n, Oid type);
extern SPIPlanPtr outbox_plan(const OutboxExtension *ext, OutboxPlan *plan);
extern uint64 outbox_run(const OutboxExtension *ext, OutboxPlan *plan,
						 Datum *values, int expected);
extern uint64 outbox_run_as_owner(const OutboxExtension *ext, OutboxPlan *plan,
								  Datum *values, const char *nulls, int expected);
extern Datum outbox_run_value(const OutboxExtension *ext, OutboxPlan *plan,
							  Datum *values, bool *isnull);

#endif							/* OUTBOX_CATALOG_H */
