/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *		outbox_enqueue(): store an event in the caller's transaction.
 *
 * The row goes straight into a log table and its indexes, or through the
 * executor's path where an operator gave the table a trigger, a constraint
 * or an index that the direct insert would pass over.  The headers of the
 * transaction (outbox.headers) are merged under the event's own.  The
 * format of the event's topic (src/format/format.h) says what its payload
 * is stored as, and what it refuses or adds of the event.  Validation
 * happens before the insert, so bad input leaves nothing behind, and the
 * worker is asked to wake up when the transaction commits.
 *
 * src/queue/enqueue.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/uuid.h"
#include "utils/xid8.h"

#include "base/catalog.h"
#include "base/event.h"
#include "base/guc.h"
#include "format/format.h"
#include "format/topics.h"
#include "launcher/launcher.h"
#include "queue/enqueue.h"

PG_FUNCTION_INFO_V1(outbox_enqueue);

/*
 * Refuse a topic name that Kafka would refuse.
 */
void
outbox_check_topic(const char *topic, int len)
{
	const char *problem = outbox_topic_problem(topic, len);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid topic name \"%.*s\"", Min(len, 64), topic),
				 errdetail("%s", problem)));
}

/*
 * Refuse an event that the worker could not publish: a bad topic, a
 * tombstone without key, a key or headers that are not UTF-8, headers that
 * are not an object of strings, what the format of its topic (with
 * setting, NULL: none) refuses, a record over outbox.max_message_bytes.
 * json says whether the payload is JSON.  *headers, those to store, may
 * get the format's.
 */
static void
check_event(const OutboxTopicSetting *setting, text *topic, const char *topic_name,
			text *key, bytea *payload, Jsonb **headers, bool json)
{
	OutboxEvent ev = {0};
	const char *problem;
	bool		not_utf8;

	outbox_check_topic(VARDATA_ANY(topic), VARSIZE_ANY_EXHDR(topic));
	if (payload == NULL && key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an event without payload needs a key"),
				 errdetail("A null payload is published as a tombstone, which deletes its key from a compacted topic.")));
	if (payload != NULL)
		ev.payload_len = VARSIZE_ANY_EXHDR(payload);
	if (key != NULL &&
		(ev.key = outbox_to_utf8(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &ev.key_len)) == NULL)
		outbox_refuse_not_utf8("key");
	if (*headers != NULL &&
		(problem = outbox_unpack_headers(*headers, &ev, &not_utf8)) != NULL)
	{
		if (not_utf8)
			outbox_refuse_not_utf8("header");
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event headers"),
				 errdetail("%s", problem)));
	}
	ev.headers_bytes += outbox_format_check_event(setting, topic_name, &ev, payload != NULL,
												  json, headers);

	if (ev.key_base64 && key != NULL && (problem = outbox_decode_key(&ev)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event key"),
				 errdetail("%s", problem)));
	if (outbox_record_bytes(&ev) > outbox_max_message_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("event is too large"),
				 errdetail("Payload, key and headers have " INT64_FORMAT " bytes; outbox.max_message_bytes is %d.",
						   outbox_record_bytes(&ev), outbox_max_message_bytes)));
}

/*
 * What an insert needs to know about the event log of one schema, looked
 * up once per session.  A relation is opened by oid at each call and
 * checked to still be the one of that name, so a dropped and re-created
 * extension is found again.
 */
typedef struct EventLog
{
	Oid			nspid;			/* the extension's schema */
	Oid			tables[OUTBOX_LOG_TABLES];	/* outbox_log_0 .. 3 */
	Oid			event_ids;		/* outbox_event_ids */
	Oid			id_sequence;	/* outbox_event_id_seq */
	Oid			restored;		/* outbox_restored(), the log's own trigger */
	AttrNumber	attnum[OUTBOX_LOG_COLUMNS];	/* the same in every log table */
	AttrNumber	event_ids_attnum[2];	/* event_id, id */
} EventLog;

static EventLog event_log;

static AttrNumber
column_of(Oid relid, const char *name)
{
	AttrNumber	attnum = get_attnum(relid, name);

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "relation %u has no column \"%s\"", relid, name);
	return attnum;
}

/* the function outbox_restored() in schema nspid, InvalidOid before 1.2 */
static Oid
restored_function(Oid nspid)
{
	return GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						   CStringGetDatum("outbox_restored"),
						   PointerGetDatum(buildoidvector(NULL, 0)),
						   ObjectIdGetDatum(nspid));
}

/*
 * Look up the log tables of ext, their columns, the event id table and
 * the id sequence.
 */
static void
look_up_event_log(const OutboxExtension *ext)
{
	event_log.nspid = InvalidOid;
	for (int t = 0; t < OUTBOX_LOG_TABLES; t++)
	{
		char		name[NAMEDATALEN];

		snprintf(name, sizeof(name), "outbox_log_%d", t);
		event_log.tables[t] = outbox_relation(ext, name);
		for (int i = 0; i < OUTBOX_LOG_COLUMNS; i++)
		{
			AttrNumber	attnum = column_of(event_log.tables[t], outbox_log_column_names[i]);

			if (t > 0 && attnum != event_log.attnum[i])
				elog(ERROR, "the log tables of outbox differ in their columns");
			event_log.attnum[i] = attnum;
		}
	}
	event_log.event_ids = outbox_relation(ext, "outbox_event_ids");
	event_log.event_ids_attnum[0] = column_of(event_log.event_ids, "event_id");
	event_log.event_ids_attnum[1] = column_of(event_log.event_ids, "id");
	event_log.id_sequence = outbox_relation(ext, "outbox_event_id_seq");
	event_log.restored = restored_function(ext->schema);
	event_log.nspid = ext->schema;
}

/*
 * Open relation relid for an insert if it is still the one named name in
 * schema nspid; NULL if not.
 */
static Relation
open_if_still(Oid relid, Oid nspid, const char *name)
{
	Relation	rel = try_table_open(relid, RowExclusiveLock);

	if (rel != NULL &&
		(RelationGetNamespace(rel) != nspid ||
		 strncmp(RelationGetRelationName(rel), name, NAMEDATALEN) != 0))
	{
		table_close(rel, RowExclusiveLock);
		rel = NULL;
	}
	return rel;
}

/*
 * Open the log table that outbox_enqueue writes to now (any of them would
 * be correct, see retention.c), or the event id table, of ext.
 */
static Relation
open_log_relation(const OutboxExtension *ext, bool event_ids)
{
	Oid			nspid = ext->schema;
	int			t = outbox_launcher_current_log(MyDatabaseId);
	char		name[NAMEDATALEN];
	Relation	rel = NULL;

	if (event_ids)
		strlcpy(name, "outbox_event_ids", sizeof(name));
	else
		snprintf(name, sizeof(name), "outbox_log_%d", t);
	if (event_log.nspid == nspid)
		rel = open_if_still(event_ids ? event_log.event_ids : event_log.tables[t],
							nspid, name);
	if (rel == NULL)
	{
		look_up_event_log(ext);
		rel = table_open(event_ids ? event_log.event_ids : event_log.tables[t],
						 RowExclusiveLock);
	}
	return rel;
}

/*
 * Did a BEFORE trigger change the row in slot from values and nulls?
 */
static bool
row_changed(TupleTableSlot *slot, const Datum *values, const bool *nulls)
{
	TupleDesc	tupdesc = slot->tts_tupleDescriptor;

	slot_getallattrs(slot);
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (slot->tts_isnull[i] != nulls[i] ||
			(!nulls[i] && !datum_image_eq(slot->tts_values[i], values[i],
										  att->attbyval, att->attlen)))
			return true;
	}
	return false;
}

/*
 * Is trigger one of the log's own, outbox_restored and outbox_restored_row,
 * which call outbox_restored()?  By the function looked up with the log,
 * looked up again only for a trigger of those names that calls another:
 * an update from 1.1 made them after this session looked.
 */
static bool
is_own_trigger(const Trigger *trigger)
{
	if (trigger->tgfoid == event_log.restored)
		return true;
	if (strcmp(trigger->tgname, "outbox_restored") != 0 &&
		strcmp(trigger->tgname, "outbox_restored_row") != 0)
		return false;
	event_log.restored = restored_function(event_log.nspid);
	return trigger->tgfoid == event_log.restored;
}

/*
 * Insert a row into rel as the executor's INSERT does, without SQL: no
 * parse, plan or permission check (the caller's right to enqueue is the
 * EXECUTE privilege on outbox_enqueue).  Its BEFORE and AFTER ROW INSERT
 * triggers fire, but outbox_restored, which is for rows written by hand
 * (restore.c); its constraints are checked (NOT NULL, CHECK, a
 * partition's, unique and exclusion); its indexes get the row.  Statement
 * triggers do not fire: no statement runs, as logical replication's apply
 * fires none.  Nothing is looked up by name at run time, and what is
 * evaluated is built in (the unique check of outbox_event_ids, btree
 * comparisons) but for what a superuser or the table's owner gave the
 * table, evaluated with the caller's rights, as any INSERT would.  A
 * BEFORE trigger may raise an error or skip the row (returns false); one
 * that changes it is refused, for the event was checked, and encoded for
 * its topic's format, as it was given.  values and nulls are by attribute
 * number - 1.
 */
static bool
insert_row(Relation rel, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	EState	   *estate = CreateExecutorState();
	MemoryContext caller_context = MemoryContextSwitchTo(estate->es_query_cxt);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TriggerDesc *trigdesc;
	TupleTableSlot *slot;
	bool		stored = true;

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(estate, list_make1(rte));
	ExecInitResultRelation(estate, rri, 1);
	/* the result relation's copy of the triggers, without the log's own */
	trigdesc = rri->ri_TrigDesc;
	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		if (is_own_trigger(&trigdesc->triggers[i]))
			trigdesc->triggers[i].tgenabled = TRIGGER_DISABLED;
	}
	ExecOpenIndices(rri, false);

	slot = ExecInitExtraTupleSlot(estate, tupdesc, &TTSOpsVirtual);
	memcpy(slot->tts_values, values, tupdesc->natts * sizeof(Datum));
	memcpy(slot->tts_isnull, nulls, tupdesc->natts * sizeof(bool));
	ExecStoreVirtualTuple(slot);

	AfterTriggerBeginQuery();
	if (trigdesc != NULL && trigdesc->trig_insert_before_row)
	{
		stored = ExecBRInsertTriggers(estate, rri, slot);
		if (stored && row_changed(slot, values, nulls))
			ereport(ERROR,
					(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
					 errmsg("a trigger on \"%s\" changed the event",
							RelationGetRelationName(rel)),
					 errdetail("The event was checked, and encoded for its topic's format, as it was given."),
					 errhint("Change the event before it is enqueued; a BEFORE trigger may refuse it (an error) or skip it (NULL).")));
	}
	if (stored)
	{
		List	   *recheck;

		if (tupdesc->constr != NULL)
			ExecConstraints(rri, slot, estate);
		if (rel->rd_rel->relispartition)
			ExecPartitionCheck(rri, slot, estate, true);
		table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
		recheck = ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
		ExecARInsertTriggers(estate, rri, slot, recheck, NULL);
	}
	AfterTriggerEndQuery(estate);
	ExecCloseResultRelations(estate);
	ExecCloseRangeTableRelations(estate);
	ExecResetTupleTable(estate->es_tupleTable, false);
	MemoryContextSwitchTo(caller_context);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	return stored;
}

/* the log's own CHECK constraint, which check_event enforces first */
#define OWN_CHECK "outbox_log_tombstone_key"

/*
 * Must a row with these nulls go to log table rel by insert_row?  When an
 * operator gave the table what the direct insert would not honour: a
 * CHECK constraint (but the log's own), a NOT NULL the row has a null
 * for, a ROW trigger on INSERT (but outbox_restored), a partition's
 * constraint.  Read from the relcache: no catalog lookup.
 */
static bool
needs_executor(Relation rel, const bool *nulls)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	TriggerDesc *trigdesc = rel->trigdesc;

	if (rel->rd_rel->relispartition)
		return true;
	for (int i = 0; tupdesc->constr != NULL && i < tupdesc->constr->num_check; i++)
	{
		if (strcmp(tupdesc->constr->check[i].ccname, OWN_CHECK) != 0)
			return true;
	}
	for (int i = 0; i < tupdesc->natts; i++)
	{
		if (nulls[i] && TupleDescAttr(tupdesc, i)->attnotnull)
			return true;
	}
	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (!is_own_trigger(trigger) &&
			trigger->tgenabled != TRIGGER_DISABLED &&
			TRIGGER_FOR_ROW(trigger->tgtype) && TRIGGER_FOR_INSERT(trigger->tgtype))
			return true;
	}
	return false;
}

/*
 * Insert a row into log table rel straight into its heap, its index
 * entries by index_insert: the log's indexes are btrees on its columns,
 * whose keys are the row's own values.  The executor's bookkeeping of them
 * (an executor state, each index's IndexInfo built again) cost as much as
 * the two index inserts, at each enqueue.  An index of another kind,
 * unique, partial, on an expression or of an exclusion constraint, and
 * what needs_executor names, send the row through insert_row instead;
 * returns false if a trigger there skipped it.
 */
static bool
insert_log_row(Relation rel, Datum *values, bool *nulls)
{
	List	   *oids = RelationGetIndexList(rel);
	Relation   *indexes = palloc(Max(list_length(oids), 1) * sizeof(Relation));
	int			n = 0;
	bool		plain = rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		!needs_executor(rel, nulls);
	HeapTuple	tuple;
	ListCell   *lc;

	foreach(lc, oids)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
		Form_pg_index form = index->rd_index;

		indexes[n++] = index;
		plain &= index->rd_rel->relam == BTREE_AM_OID && !form->indisunique &&
			!form->indisexclusion &&
			heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL) &&
			heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL);
	}
	if (!plain)
	{
		for (int i = 0; i < n; i++)
			index_close(indexes[i], RowExclusiveLock);
		list_free(oids);
		pfree(indexes);
		return insert_row(rel, values, nulls);
	}

	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	heap_insert(rel, tuple, GetCurrentCommandId(true), 0, NULL);
	for (int i = 0; i < n; i++)
	{
		Form_pg_index form = indexes[i]->rd_index;
		Datum		keys[INDEX_MAX_KEYS];
		bool		key_nulls[INDEX_MAX_KEYS];

		/* one that CREATE INDEX CONCURRENTLY has not made ready yet */
		if (form->indisready)
		{
			IndexInfo  *info = makeIndexInfo(form->indnatts, form->indnkeyatts,
											 BTREE_AM_OID, NIL, NIL,
											 false, false, true, false);

			for (int k = 0; k < form->indnatts; k++)
			{
				keys[k] = values[form->indkey.values[k] - 1];
				key_nulls[k] = nulls[form->indkey.values[k] - 1];
			}
			index_insert(indexes[i], keys, key_nulls, &tuple->t_self, rel,
						 UNIQUE_CHECK_NO, false, info);
			pfree(info);
		}
		index_close(indexes[i], NoLock);
	}
	heap_freetuple(tuple);
	list_free(oids);
	pfree(indexes);
	table_close(rel, NoLock);
	return true;
}

/*
 * A new event id: a version 4 UUID, as gen_random_uuid() makes, from a pool
 * of strong random bytes drawn 4 kB at a time: drawn 16 bytes at a time,
 * as gen_random_uuid() does, they cost an enqueue more instructions than
 * its heap insert (test/bench/enqueue_cost.sh).  The pool is this
 * process's own: a child forked from it starts with none (forget_id_pool;
 * a backend, forked by the postmaster, which enqueues nothing, too).
 */
static uint8 id_pool[4096];
static int	id_pool_used = sizeof(id_pool);

/* a process forked from this one (a PL's fork()) draws its own */
static void
forget_id_pool(void)
{
	id_pool_used = sizeof(id_pool);
}

static Datum
new_event_id(void)
{
	static bool at_fork = false;
	pg_uuid_t  *uuid = palloc(UUID_LEN);

	if (!at_fork)
	{
		if (pthread_atfork(NULL, NULL, forget_id_pool) != 0)
			elog(ERROR, "could not register a fork handler");
		at_fork = true;
	}
	if (id_pool_used + UUID_LEN > sizeof(id_pool))
	{
		if (!pg_strong_random(id_pool, sizeof(id_pool)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		id_pool_used = 0;
	}
	memcpy(uuid->data, id_pool + id_pool_used, UUID_LEN);
	id_pool_used += UUID_LEN;
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40;	/* version 4 */
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;	/* variant RFC 4122 */
	return UUIDPGetDatum(uuid);
}

/*
 * Does an event of ext hold event_id, or a transaction in progress enter
 * it?  Read in outbox_event_ids with a dirty snapshot, which sees both.
 */
static bool
event_id_taken(const OutboxExtension *ext, Datum event_id)
{
	Relation	rel = open_log_relation(ext, true);
	Oid			index = RelationGetPrimaryKeyIndex(rel);
	SnapshotData dirty;
	ScanKeyData key;
	SysScanDesc scan;
	bool		taken;

	if (!OidIsValid(index))
		elog(ERROR, "table \"%s\" has no primary key", RelationGetRelationName(rel));
	InitDirtySnapshot(dirty);
	ScanKeyInit(&key, event_log.event_ids_attnum[0], BTEqualStrategyNumber, F_UUID_EQ,
				event_id);
	scan = systable_beginscan(rel, index, true, &dirty, 1, &key);
	taken = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, NoLock);
	return taken;
}

/*
 * Append an event to the log of ext; *id gets its id.  columns holds every
 * column but id, txid, event_id and created_at (by default the start of
 * the transaction).  The txid is taken before the id: the claim relies on
 * it (src/queue/reader.c).  An event_id given by the caller is entered in
 * outbox_event_ids once the row is written, so that a duplicate fails
 * with 23505; unless unique, one that an event holds already is replaced
 * by a new one instead (two transactions that give it at the same instant
 * may still meet in the unique index: the second waits for the first, and
 * fails if it commits).  Returns false if an operator's trigger on the log
 * skipped the row (see insert_row): nothing is stored, the event_id is not
 * taken.
 */
static bool
append_event(const OutboxExtension *ext, Datum *columns, bool *nulls, Datum event_id,
			 bool event_id_isnull, bool unique, const TimestampTz *created_at, int64 *id)
{
	FullTransactionId txid = GetTopFullTransactionId();
	Relation	log = open_log_relation(ext, false);
	Datum		values[OUTBOX_LOG_COLUMNS];
	bool		isnull[OUTBOX_LOG_COLUMNS];

	if (!event_id_isnull && !unique && event_id_taken(ext, event_id))
		event_id_isnull = true;
	*id = nextval_internal(event_log.id_sequence, false);
	columns[LOG_ID] = Int64GetDatum(*id);
	nulls[LOG_ID] = false;
	columns[LOG_TXID] = FullTransactionIdGetDatum(txid);
	nulls[LOG_TXID] = false;
	columns[LOG_EVENT_ID] = event_id_isnull ? new_event_id() : event_id;
	nulls[LOG_EVENT_ID] = false;
	columns[LOG_CREATED_AT] = TimestampTzGetDatum(created_at != NULL ? *created_at :
												  GetCurrentTransactionStartTimestamp());
	nulls[LOG_CREATED_AT] = false;

	if (RelationGetDescr(log)->natts != OUTBOX_LOG_COLUMNS)
		elog(ERROR, "log table \"%s\" has unexpected columns", RelationGetRelationName(log));
	for (int i = 0; i < OUTBOX_LOG_COLUMNS; i++)
	{
		values[event_log.attnum[i] - 1] = columns[i];
		isnull[event_log.attnum[i] - 1] = nulls[i];
	}
	if (!insert_log_row(log, values, isnull))
		return false;

	if (!event_id_isnull)
	{
		Relation	rel = open_log_relation(ext, true);
		MemoryContext cxt = CurrentMemoryContext;

		values[event_log.event_ids_attnum[0] - 1] = event_id;
		values[event_log.event_ids_attnum[1] - 1] = Int64GetDatum(*id);
		memset(isnull, false, sizeof(isnull));
		/* a duplicate event_id says what to do about it */
		PG_TRY();
		{
			(void) insert_row(rel, values, isnull);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
				PG_RE_THROW();
			FlushErrorState();
			edata->hint = pstrdup("An event_id names one event: enqueuing it again is refused. "
								  "Give each event an id of its own, or none (NULL) for a new UUID.");
			ReThrowError(edata);
		}
		PG_END_TRY();
	}
	return true;
}

/*
 * Validate an event of topic (topic_name, as a C string) with setting
 * (NULL: none) and append it to the log of ext, in the current
 * transaction; *id gets the new row's id.  unique: a given event_id that
 * an event holds is refused, else replaced (see append_event).
 * Returns false if an operator's trigger on the log skipped it.
 */
static bool
store_event(const OutboxExtension *ext, const OutboxTopicSetting *setting,
			text *topic, const char *topic_name, text *key, bytea *payload, Jsonb *headers,
			Datum event_id, bool event_id_isnull, bool unique,
			const TimestampTz *created_at, bool json, int64 *id)
{
	Datum		columns[OUTBOX_LOG_COLUMNS];
	bool		nulls[OUTBOX_LOG_COLUMNS];

	/* the insert below bypasses the executor, which would check this */
	PreventCommandIfReadOnly("outbox_enqueue()");

	/* the transaction's headers (outbox.headers), under the call's own */
	if (outbox_transaction_headers != NULL)
		headers = headers == NULL ? outbox_transaction_headers :
			DatumGetJsonbP(DirectFunctionCall2(jsonb_concat,
											   JsonbPGetDatum(outbox_transaction_headers),
											   JsonbPGetDatum(headers)));
	check_event(setting, topic, topic_name, key, payload, &headers, json);

	columns[LOG_TOPIC] = PointerGetDatum(topic);
	nulls[LOG_TOPIC] = false;
	columns[LOG_KEY] = PointerGetDatum(key);
	nulls[LOG_KEY] = key == NULL;
	columns[LOG_PAYLOAD] = PointerGetDatum(payload);
	nulls[LOG_PAYLOAD] = payload == NULL;
	columns[LOG_HEADERS] = PointerGetDatum(headers);
	nulls[LOG_HEADERS] = headers == NULL;

	if (!append_event(ext, columns, nulls, event_id, event_id_isnull, unique, created_at, id))
		return false;
	outbox_wake_at_commit();
	return true;
}

/*
 * Validate an event and append it to the log of ext, in the current
 * transaction.  A NULL payload is a tombstone; key and headers may be
 * NULL; json says whether the payload is JSON.  created_at, the record's
 * timestamp, is the start of the transaction unless given.  event_id, if
 * not null, is the event's unless an event holds it already: then it gets
 * a new one (an outbox table's id used again is published again).
 * Returns false if an operator's trigger on the log skipped it.
 */
bool
outbox_store_event(const OutboxExtension *ext, text *topic, text *key, bytea *payload,
				   Jsonb *headers, Datum event_id, bool event_id_isnull,
				   const TimestampTz *created_at, bool json)
{
	char	   *topic_name = text_to_cstring(topic);
	int64		id;

	return store_event(ext, outbox_topic_setting_to_enqueue(ext, topic_name),
					   topic, topic_name, key, payload, headers, event_id, event_id_isnull,
					   false, created_at, json, &id);
}

/*
 * outbox_enqueue(topic text, payload {jsonb|text|bytea}, key text,
 *				  headers jsonb, event_id uuid) RETURNS bigint
 *
 * One C function serves the three SQL signatures; the declared type of the
 * payload argument says how to turn it into bytes.  NULL if an operator's
 * trigger on the log skipped the event.
 */
Datum
outbox_enqueue(PG_FUNCTION_ARGS)
{
	const OutboxExtension *ext;
	const OutboxTopicSetting *setting;
	char	   *topic_name;
	text	   *key;
	bytea	   *payload;
	bool		json;
	int64		id;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be null")));

	ext = outbox_entry(fcinfo);
	topic_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	setting = outbox_topic_setting_to_enqueue(ext, topic_name);
	key = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	/* the setting looked up once: the one the payload is encoded for */
	payload = outbox_format_encode(setting, key, PG_GETARG_DATUM(1), PG_ARGISNULL(1),
								   get_fn_expr_argtype(fcinfo->flinfo, 1), &json);
	if (!store_event(ext, setting, PG_GETARG_TEXT_PP(0), topic_name, key, payload,
					 PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3),
					 PG_GETARG_DATUM(4), PG_ARGISNULL(4), true, NULL, json, &id))
		PG_RETURN_NULL();		/* an operator's trigger skipped it */
	PG_RETURN_INT64(id);
}
