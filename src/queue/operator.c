/*-------------------------------------------------------------------------
 *
 * operator.c
 *		What an operator does to events by hand: retry them, give up on
 *		them (abandon, discard), copy abandoned ones to the dead-letter
 *		topic; and the count of undelivered events that DROP EXTENSION
 *		asks for.  Giving up takes the claim lock: docs/design.md, "The
 *		claim", says why.
 *
 * src/queue/operator.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/xid8.h"

#include "base/guc.h"
#include "launcher/launcher.h"
#include "queue/claim.h"
#include "queue/operator.h"
#include "queue/reader.h"
#include "queue/retries.h"

/*
 * How many events are not delivered yet: unread in the log, pending or
 * failed in the retry table, as the active snapshot sees them (the caller
 * chooses it: the count is read-only, and takes no snapshot of its own).
 * Takes a connection to SPI.
 */
int64
outbox_undelivered(const OutboxExtension *ext)
{
	int64		retried;
	int			nestlevel;

	/*
	 * The hooks of DROP run this in the caller's session, not in a function
	 * of the extension with a pinned search_path: pinned here, or an
	 * operator planted in a schema on the caller's path would run with the
	 * caller's rights.
	 */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SPI_connect();
	retried = outbox_retries_undelivered(ext);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return retried + outbox_count_unread(ext);
}

PG_FUNCTION_INFO_V1(outbox_dead_letter);
PG_FUNCTION_INFO_V1(outbox_retry);
PG_FUNCTION_INFO_V1(outbox_retry_abandoned);
PG_FUNCTION_INFO_V1(outbox_abandon);
PG_FUNCTION_INFO_V1(outbox_discard);

/*
 * outbox_dead_letter(ids bigint[], dead_letter_topic text) RETURNS bigint
 *
 * Copy abandoned events to the dead-letter topic (see retries.c);
 * returns how many.
 */
Datum
outbox_dead_letter(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	int64		sent = 0;

	SPI_connect();
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(1))
		sent = outbox_retries_dead_letters(ext, PG_GETARG_DATUM(0),
										   text_to_cstring(PG_GETARG_TEXT_PP(1)));
	SPI_finish();
	if (sent > 0)
		outbox_wake_at_commit();
	PG_RETURN_INT64(sent);
}

/*
 * outbox_retry(id bigint) RETURNS integer
 *
 * A failed or abandoned event back to pending, due at once, attempts reset;
 * 1, or 0 if it was neither.
 */
Datum
outbox_retry(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	int64		updated;

	SPI_connect();
	updated = outbox_retries_retry(ext, PG_GETARG_DATUM(0));
	SPI_finish();
	if (updated > 0)
		outbox_wake_at_commit();
	PG_RETURN_INT32((int32) updated);
}

/*
 * outbox_retry_abandoned(topic text DEFAULT NULL) RETURNS bigint
 *
 * Every abandoned event (of one topic) back to pending; how many.
 */
Datum
outbox_retry_abandoned(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	int64		updated;

	SPI_connect();
	updated = outbox_retries_retry_abandoned(ext, PG_GETARG_DATUM(0), PG_ARGISNULL(0));
	SPI_finish();
	if (updated > 0)
		outbox_wake_at_commit();
	PG_RETURN_INT64(updated);
}

/* Is the log event (id, txid) still unread at reader? */
static bool
unread(const OutboxReader *reader, int64 id, FullTransactionId txid)
{
	if (id > reader->last_id)
		return true;
	for (int i = 0; i < reader->nrunning; i++)
		if (FullTransactionIdEquals(reader->running[i], txid))
			return true;
	for (int i = 0; i < reader->ndraining; i++)
		if (FullTransactionIdEquals(reader->draining[i], txid))
			return id > reader->drain_after && id <= reader->drain_upto;
	return false;
}

/*
 * Copy the unread events of the log to the retry table, due, and move the
 * reader past them; returns how many.  The caller is connected to SPI and
 * holds the claim lock.
 */
static int64
copy_unread(const OutboxExtension *ext, OutboxReaderRow *row)
{
	MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"outbox unread events",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext spi_cxt = MemoryContextSwitchTo(chunk_cxt);
	OutboxEvent *events = MemoryContextAlloc(spi_cxt, 1000 * sizeof(OutboxEvent));
	OutboxEvent *pointers[1000];
	int64		copied = 0;
	int			n;

	for (;;)
	{
		int64		bytes_left = PG_INT64_MAX;

		n = outbox_read_log(ext, &row->reader, lengthof(pointers), &bytes_left, events);
		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			pointers[i] = &events[i];
		outbox_retries_copy(ext, pointers, n);
		MemoryContextSwitchTo(chunk_cxt);
		MemoryContextReset(chunk_cxt);
		copied += n;
	}
	MemoryContextSwitchTo(spi_cxt);
	outbox_save_reader(ext, row, 0);
	MemoryContextDelete(chunk_cxt);
	return copied;
}

/*
 * outbox_abandon(id bigint) RETURNS integer
 *
 * Give up on a pending or failed event on purpose: it becomes abandoned
 * (and goes to the dead-letter topic, if one is set), which releases the
 * later events of its key.  An unread event of the log is copied to the
 * retry table first, under the claim lock, so that the claim
 * passes over it; if the event is in flight, that waits for its batch to
 * be recorded.  Returns 1, or 0 if it was neither pending nor failed.
 */
Datum
outbox_abandon(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	Datum		id = PG_GETARG_DATUM(0);
	OutboxReaderRow row;
	OutboxEvent *events;
	int64		abandoned;

	outbox_require_read_committed("outbox_abandon()");
	SPI_connect();
	outbox_lock_reader(ext, true, &row);
	if (outbox_log_events(ext, outbox_array(&id, NULL, 1, INT8OID), &events) == 1 &&
		unread(&row.reader, events[0].id,
			   DatumGetFullTransactionId(events[0].values[LOG_TXID])))
		outbox_retries_copy(ext, &events, 1);
	abandoned = outbox_retries_abandon(ext, id, false, "abandoned by outbox_abandon()",
						outbox_dead_letter_topic);
	SPI_finish();
	if (abandoned > 0)
		outbox_wake_at_commit();
	PG_RETURN_INT32((int32) abandoned);
}

/*
 * outbox_discard() RETURNS bigint
 *
 * Give up on every event not delivered yet, on purpose: each becomes
 * abandoned, with "discarded by outbox_discard()" as its last error if it
 * had none, and none goes to the dead-letter topic.  What DROP EXTENSION
 * asks for before it drops undelivered events.  Returns how many.
 */
Datum
outbox_discard(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext = outbox_entry(fcinfo);
	OutboxReaderRow row;
	int64		discarded;

	outbox_require_read_committed("outbox_discard()");
	/* before any snapshot that finds what to discard */
	outbox_none_undelivered_at_commit();
	SPI_connect();
	outbox_lock_reader(ext, true, &row);
	copy_unread(ext, &row);
	discarded = outbox_retries_abandon(ext, (Datum) 0, true, "discarded by outbox_discard()", "");
	SPI_finish();
	PG_RETURN_INT64(discarded);
}
