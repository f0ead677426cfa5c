/*-------------------------------------------------------------------------
 *
 * status.c
 *		outbox_worker_status() and outbox_cluster_status(): what each
 *		database's worker is doing, and each Kafka cluster it publishes to,
 *		from shared memory only; another database's only to superusers and
 *		members of pg_monitor.  docs/design.md, "What the operator sees",
 *		says why.
 *
 * src/launcher/status.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "base/catalog.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

PG_FUNCTION_INFO_V1(outbox_worker_status);
PG_FUNCTION_INFO_V1(outbox_cluster_status);

/* the names of the states, in OutboxWorkerState order */
static const char *const state_names[] = {
	"stopped",
	"starting",
	"waiting for database",
	"waiting for extension",
	"waiting for worker slot",
	"standby",
	"idle",
	"publishing",
	"broker unreachable",
	"waiting for standby",
	"backing off",
	"disabled",
	"waiting for restore",
	"parked",
};

StaticAssertDecl(lengthof(state_names) == OUTBOX_WORKER_PARKED + 1,
				 "state_names must match OutboxWorkerState");

/* the columns this library can fill, by name */
typedef enum StatusColumn
{
	COL_DATABASE,
	COL_PID,
	COL_STATE,
	COL_STATE_SINCE,
	COL_STARTED_AT,
	COL_BROKERS_UP,
	COL_PUBLISHED,
	COL_FAILED,
	COL_LAST_BATCH_AT,
	COL_LAST_ERROR,
	STATUS_COLUMNS
} StatusColumn;

static const char *const column_names[STATUS_COLUMNS] = {
	"database", "pid", "state", "state_since", "started_at", "brokers_up",
	"published", "failed", "last_batch_at", "last_error"
};

/*
 * The column of each attribute of the declared result; an error for one
 * this library does not know.
 */
static void
map_columns(TupleDesc desc, StatusColumn *columns)
{
	for (int a = 0; a < desc->natts; a++)
	{
		const char *name = NameStr(TupleDescAttr(desc, a)->attname);
		int			c;

		for (c = 0; c < STATUS_COLUMNS && strcmp(column_names[c], name) != 0; c++)
			;
		if (c == STATUS_COLUMNS)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("outbox_worker_status() is declared with a column \"%s\" that this library does not fill",
							name),
					 errhint("Update the extension with ALTER EXTENSION outbox UPDATE.")));
		columns[a] = (StatusColumn) c;
	}
}

/*
 * The values of one slot, by column.
 */
static void
slot_values(OutboxWorkerSlot *slot, OutboxWorkerSlot *copy, bool see_error,
			Datum *values, bool *nulls)
{
	char	   *dbname;
	const char *error;

	/* the current name: the database may have been renamed */
	dbname = OidIsValid(copy->database) ? get_database_name(copy->database) : NULL;
	values[COL_DATABASE] = DirectFunctionCall1(namein,
											   CStringGetDatum(dbname ? dbname : NameStr(copy->dbname)));
	values[COL_PID] = Int32GetDatum(copy->pid);
	nulls[COL_PID] = copy->pid == 0;
	values[COL_STATE] = CStringGetTextDatum(state_names[copy->state]);
	values[COL_STATE_SINCE] = TimestampTzGetDatum(copy->state_since);
	nulls[COL_STATE_SINCE] = copy->state_since == 0;
	values[COL_STARTED_AT] = TimestampTzGetDatum(copy->started_at);
	nulls[COL_STARTED_AT] = copy->pid == 0;
	values[COL_BROKERS_UP] = Int32GetDatum(copy->brokers_up);
	nulls[COL_BROKERS_UP] = copy->pid == 0 || copy->brokers_up < 0;
	values[COL_PUBLISHED] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->published));
	values[COL_FAILED] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->failed));
	values[COL_LAST_BATCH_AT] = TimestampTzGetDatum(copy->last_batch_at);
	nulls[COL_LAST_BATCH_AT] = copy->last_batch_at == 0;
	/* why it is in its state, else the failing topic */
	error = copy->last_error[0] != '\0' ? copy->last_error : copy->refusal;
	values[COL_LAST_ERROR] = CStringGetTextDatum(error);
	nulls[COL_LAST_ERROR] = error[0] == '\0' || !see_error;
}

/* Put the values of one row, in the order of the declared columns. */
static void
put_row(ReturnSetInfo *rsinfo, StatusColumn *columns, Datum *values, bool *nulls)
{
	Datum		row[STATUS_COLUMNS];
	bool		row_nulls[STATUS_COLUMNS];

	for (int a = 0; a < rsinfo->setDesc->natts; a++)
	{
		row[a] = values[columns[a]];
		row_nulls[a] = nulls[columns[a]];
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
}

/*
 * The entry check of both functions: the workers' status is in the
 * launcher's shared memory, which exists only where the library is
 * preloaded.
 */
static void
require_launcher(FunctionCallInfo fcinfo)
{
	outbox_entry(fcinfo);
	if (!outbox_launcher_exists())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("outbox worker status is not available"),
				 errhint("Add outbox to shared_preload_libraries and restart the server.")));
}

/*
 * One row per database that is served or waits to be; on a standby, where
 * no worker runs until promotion, one row that says so.
 */
Datum
outbox_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	StatusColumn columns[STATUS_COLUMNS];
	bool		monitor = has_privs_of_role(GetUserId(), ROLE_PG_MONITOR);
	bool		any = false;

	require_launcher(fcinfo);
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts > STATUS_COLUMNS)
		elog(ERROR, "outbox_worker_status() is declared with too many columns");
	map_columns(rsinfo->setDesc, columns);

	for (int i = 0; i < outbox_slot_count(); i++)
	{
		OutboxWorkerSlot *slot = outbox_slot(i);
		OutboxWorkerSlot copy;
		Datum		values[STATUS_COLUMNS] = {0};
		bool		nulls[STATUS_COLUMNS] = {false};

		outbox_slot_lock();
		memcpy(&copy, slot, sizeof(copy));
		outbox_slot_unlock();
		if (!copy.in_use)
			continue;
		slot_values(slot, &copy, monitor || copy.database == MyDatabaseId, values, nulls);
		put_row(rsinfo, columns, values, nulls);
		any = true;
	}

	if (!any && RecoveryInProgress())
	{
		Datum		values[STATUS_COLUMNS] = {0};
		bool		nulls[STATUS_COLUMNS];

		memset(nulls, true, sizeof(nulls));
		values[COL_STATE] = CStringGetTextDatum(state_names[OUTBOX_WORKER_STANDBY]);
		nulls[COL_STATE] = false;
		put_row(rsinfo, columns, values, nulls);
	}
	return (Datum) 0;
}

/*
 * outbox_cluster_status() RETURNS TABLE (database name, brokers text,
 *		state text, state_since timestamptz, brokers_up integer,
 *		published bigint, failed bigint)
 *
 * One row per Kafka cluster that a running worker publishes to (its first
 * OUTBOX_STATUS_CLUSTERS): state "up", "unreachable" (every broker down:
 * its topics' events wait) or "closed" (no producer: the worker is idle).
 */
Datum
outbox_cluster_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		monitor = has_privs_of_role(GetUserId(), ROLE_PG_MONITOR);

	require_launcher(fcinfo);
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != 7)
		elog(ERROR, "outbox_cluster_status() is not declared as this library expects");

	for (int i = 0; i < outbox_slot_count(); i++)
	{
		OutboxWorkerSlot *slot = outbox_slot(i);
		OutboxWorkerSlot copy;
		char	   *dbname;

		outbox_slot_lock();
		memcpy(&copy, slot, sizeof(copy));
		outbox_slot_unlock();
		if (!copy.in_use || copy.pid == 0 ||
			(!monitor && copy.database != MyDatabaseId))
			continue;
		dbname = OidIsValid(copy.database) ? get_database_name(copy.database) : NULL;
		for (int c = 0; c < copy.nclusters; c++)
		{
			OutboxClusterStatus *cluster = &copy.clusters[c];
			Datum		values[7];
			bool		nulls[7] = {false};

			values[0] = DirectFunctionCall1(namein,
											CStringGetDatum(dbname ? dbname : NameStr(copy.dbname)));
			values[1] = CStringGetTextDatum(cluster->brokers);
			values[2] = CStringGetTextDatum(!cluster->open ? "closed" :
											cluster->reachable ? "up" : "unreachable");
			values[3] = TimestampTzGetDatum(cluster->state_since);
			values[4] = Int32GetDatum(cluster->brokers_up);
			nulls[4] = cluster->brokers_up < 0;
			values[5] = Int64GetDatum(cluster->published);
			values[6] = Int64GetDatum(cluster->failed);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
