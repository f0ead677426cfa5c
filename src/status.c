/*-------------------------------------------------------------------------
 *
 * status.c
 *		outbox_worker_status(): what the worker is doing, from shared memory
 *		only, so that it answers however large or locked the table is.
 *
 * src/status.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
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
	"standby",
	"idle",
	"publishing",
	"broker unreachable",
	"waiting for standby",
	"backing off",
};

StaticAssertDecl(lengthof(state_names) == OUTBOX_WORKER_BACKING_OFF + 1,
				 "state_names must match OutboxWorkerState");

Datum
outbox_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9] = {false};
	OutboxShared copy;

	if (outbox_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("outbox worker status is not available"),
				 errhint("Add outbox to shared_preload_libraries and restart the server.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	SpinLockAcquire(&outbox_shared->mutex);
	memcpy(&copy, outbox_shared, sizeof(copy));
	SpinLockRelease(&outbox_shared->mutex);

	/* the worker starts only once recovery has finished */
	if (copy.worker_pid == 0 && RecoveryInProgress())
		copy.state = OUTBOX_WORKER_STANDBY;

	values[0] = Int32GetDatum(copy.worker_pid);
	nulls[0] = copy.worker_pid == 0;
	values[1] = CStringGetTextDatum(state_names[copy.state]);
	values[2] = TimestampTzGetDatum(copy.state_since);
	nulls[2] = copy.state_since == 0;
	values[3] = TimestampTzGetDatum(copy.started_at);
	nulls[3] = copy.worker_pid == 0;
	values[4] = Int32GetDatum(copy.brokers_up);
	nulls[4] = copy.worker_pid == 0;
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&outbox_shared->published));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&outbox_shared->failed));
	values[7] = TimestampTzGetDatum(copy.last_batch_at);
	nulls[7] = copy.last_batch_at == 0;
	values[8] = CStringGetTextDatum(copy.last_error);
	nulls[8] = copy.last_error[0] == '\0';

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
