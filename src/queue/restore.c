/*-------------------------------------------------------------------------
 *
 * restore.c
 *		Events that enter the log by hand (a restore of a dump): the trigger
 *		on the log tables that notes the restoring backend for the launcher
 *		and gives each restored row the restoring transaction as its txid.
 *		docs/design.md, "Versions, dumps and drops", says why.
 *
 * src/queue/restore.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/rel.h"
#include "utils/xid8.h"

#include "base/catalog.h"
#include "base/event.h"
#include "launcher/launcher.h"

PG_FUNCTION_INFO_V1(outbox_restored);

/*
 * outbox_restored() RETURNS trigger
 *
 * BEFORE INSERT on the log tables, FOR EACH STATEMENT and FOR EACH ROW.
 */
Datum
outbox_restored(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	int			attnum = LOG_TXID + 1;
	Datum		txid;
	bool		isnull = false;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be fired BEFORE INSERT", "outbox_restored")));
	outbox_entry(fcinfo);
	if (outbox_launcher_exists())
		outbox_launcher_note_restore(MyDatabaseId);
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		return PointerGetDatum(NULL);

	if (RelationGetDescr(trigdata->tg_relation)->natts != OUTBOX_LOG_COLUMNS)
		elog(ERROR, "outbox_restored: not a log table");
	txid = FullTransactionIdGetDatum(GetTopFullTransactionId());
	return PointerGetDatum(heap_modify_tuple_by_cols(trigdata->tg_trigtuple,
													 RelationGetDescr(trigdata->tg_relation),
													 1, &attnum, &txid, &isnull));
}
