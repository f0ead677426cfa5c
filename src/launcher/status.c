/*-------------------------------------------------------------------------
 *
 * status.c
 *		outbox_worker_status() and outbox_cluster_status(): what each
 *		database's worker is doing, and each Kafka cluster it publishes to
 *		(clusters.c), from shared memory only; another database's only to
 *		superusers and members of pg_monitor.  docs/design.md, "What the
 *		operator sees", says why.
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

/* the columns of outbox_worker_status() this library can fill, by name */
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

/* the columns of outbox_cluster_status() this library can fill, by name */
typedef enum ClusterColumn
{
	CCOL_DATABASE,
	CCOL_BROKERS,
	CCOL_PROPERTIES_FILE,
	CCOL_STATE,
	CCOL_STATE_SINCE,
	CCOL_BROKERS_UP,
	CCOL_PUBLISHED,
	CCOL_FAILED,
	CLUSTER_COLUMNS
} ClusterColumn;

static const char *const cluster_column_names[CLUSTER_COLUMNS] = {
	"database", "brokers", "properties_file", "state", "state_since",
	"brokers_up", "published", "failed"
};

/*
 * The column of each attribute of function's declared result, among the
 * count names this library fills; an error for one it does not know.
 */
static void
map_columns(TupleDesc desc, const char *function, const char *const *names,
			int count, int *columns)
{
	if (desc->natts > count)
		elog(ERROR, "%s is declared with too many columns", function);
	for (int a = 0; a < desc->natts; a++)
	{
		const char *name = NameStr(TupleDescAttr(desc, a)->attname);
		int			c;

		for (c = 0; c < count && strcmp(names[c], name) != 0; c++)
			;
		if (c == count)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s is declared with a column \"%s\" that this library does not fill",
							function, name),
					 errhint("Update the extension with ALTER EXTENSION outbox UPDATE.")));
		columns[a] = c;
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

/*
 * Put the values of one row (by column), in the order of the declared
 * columns.
 */
static void
put_row(ReturnSetInfo *rsinfo, const int *columns, Datum *values, bool *nulls)
{
	Datum		row[Max((int) STATUS_COLUMNS, (int) CLUSTER_COLUMNS)];
	bool		row_nulls[Max((int) STATUS_COLUMNS, (int) CLUSTER_COLUMNS)];

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
	int			columns[STATUS_COLUMNS];
	bool		monitor = has_privs_of_role(GetUserId(), ROLE_PG_MONITOR);
	bool		any = false;

	require_launcher(fcinfo);
	InitMaterializedSRF(fcinfo, 0);
	map_columns(rsinfo->setDesc, "outbox_worker_status()", column_names,
				STATUS_COLUMNS, columns);

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
 *		properties_file text, state text, state_since timestamptz,
 *		brokers_up integer, published bigint, failed bigint)
 *
 * One row per Kafka cluster that a running worker publishes to, as many as
 * it has, the unreachable ones first: its brokers and the properties file
 * it reads ("" for none), which tell apart the producers of one cluster;
 * state "up", "unreachable" (every broker down: its topics' events wait) or
 * "closed" (no producer: the worker is idle).  Fills the columns its
 * declaration names: 1.3's has no properties_file.
 */
Datum
outbox_cluster_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		monitor = has_privs_of_role(GetUserId(), ROLE_PG_MONITOR);
	int			columns[CLUSTER_COLUMNS];

	require_launcher(fcinfo);
	InitMaterializedSRF(fcinfo, 0);
	map_columns(rsinfo->setDesc, "outbox_cluster_status()", cluster_column_names,
				CLUSTER_COLUMNS, columns);

	for (int i = 0; i < outbox_slot_count(); i++)
	{
		OutboxWorkerSlot *slot = outbox_slot(i);
		OutboxWorkerSlot copy;
		OutboxProducerStatus *clusters;
		char	   *dbname;
		int			n;

		outbox_slot_lock();
		memcpy(&copy, slot, sizeof(copy));
		outbox_slot_unlock();
		if (!copy.in_use || copy.pid == 0 ||
			(!monitor && copy.database != MyDatabaseId))
			continue;
		dbname = OidIsValid(copy.database) ? get_database_name(copy.database) : NULL;
		clusters = outbox_slot_clusters(slot, copy.pid, &n);
		for (int c = 0; c < n; c++)
		{
			OutboxProducerStatus *cluster = &clusters[c];
			Datum		values[CLUSTER_COLUMNS];
			bool		nulls[CLUSTER_COLUMNS] = {false};

			values[CCOL_DATABASE] = DirectFunctionCall1(namein,
														CStringGetDatum(dbname ? dbname : NameStr(copy.dbname)));
			values[CCOL_BROKERS] = CStringGetTextDatum(cluster->cluster.brokers);
			values[CCOL_PROPERTIES_FILE] = CStringGetTextDatum(cluster->cluster.properties_file);
			values[CCOL_STATE] = CStringGetTextDatum(!cluster->open ? "closed" :
													 cluster->reachable ? "up" : "unreachable");
			values[CCOL_STATE_SINCE] = TimestampTzGetDatum(cluster->state_since);
			values[CCOL_BROKERS_UP] = Int32GetDatum(cluster->brokers_up);
			nulls[CCOL_BROKERS_UP] = cluster->brokers_up < 0;
			values[CCOL_PUBLISHED] = Int64GetDatum(cluster->published);
			values[CCOL_FAILED] = Int64GetDatum(cluster->failed);
			put_row(rsinfo, columns, values, nulls);
		}
	}
	return (Datum) 0;
}
