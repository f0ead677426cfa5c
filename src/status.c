/*-------------------------------------------------------------------------
 *
 * status.c
 *		outbox_worker_status(): what each database's worker is doing, from
 *		shared memory only, so that it answers however large or locked the
 *		table is, and from any database.
 *
 * src/status.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "outbox.h"

PG_FUNCTION_INFO_V1(outbox_worker_status);

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
};

StaticAssertDecl(lengthof(state_names) == OUTBOX_WORKER_BACKING_OFF + 1,
				 "state_names must match OutboxWorkerState");

/*
 * One row per database that is served or waits to be; on a standby, where
 * no worker runs until promotion, one row that says so.
 */
Datum
outbox_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		standby = RecoveryInProgress();
	bool		any = false;

	if (outbox_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("outbox worker status is not available"),
				 errhint("Add outbox to shared_preload_libraries and restart the server.")));
	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < outbox_shared->nslots; i++)
	{
		OutboxWorkerSlot *slot = &outbox_shared->slots[i];
		OutboxWorkerSlot copy;
		Datum		values[10];
		bool		nulls[10] = {false};
		char	   *dbname;

		SpinLockAcquire(&outbox_shared->mutex);
		memcpy(&copy, slot, sizeof(copy));
		SpinLockRelease(&outbox_shared->mutex);
		if (!copy.in_use)
			continue;

		/* the current name: the database may have been renamed */
		dbname = OidIsValid(copy.database) ? get_database_name(copy.database) : NULL;
		values[0] = CStringGetDatum(dbname ? dbname : NameStr(copy.dbname));
		values[0] = DirectFunctionCall1(namein, values[0]);
		values[1] = Int32GetDatum(copy.pid);
		nulls[1] = copy.pid == 0;
		values[2] = CStringGetTextDatum(state_names[copy.state]);
		values[3] = TimestampTzGetDatum(copy.state_since);
		nulls[3] = copy.state_since == 0;
		values[4] = TimestampTzGetDatum(copy.started_at);
		nulls[4] = copy.pid == 0;
		values[5] = Int32GetDatum(copy.brokers_up);
		nulls[5] = copy.pid == 0 || copy.brokers_up < 0;
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->published));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->failed));
		values[8] = TimestampTzGetDatum(copy.last_batch_at);
		nulls[8] = copy.last_batch_at == 0;
		values[9] = CStringGetTextDatum(copy.last_error);
		nulls[9] = copy.last_error[0] == '\0';
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		any = true;
	}

	if (!any && standby)
	{
		Datum		values[10] = {0};
		bool		nulls[10] = {true, true, false, true, true, true, true, true, true, true};

		values[2] = CStringGetTextDatum(state_names[OUTBOX_WORKER_STANDBY]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
