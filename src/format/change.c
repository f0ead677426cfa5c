/*-------------------------------------------------------------------------
 *
 * change.c
 *		Row changes as the formats of their events see them: a captured
 *		table as its events name it (CaptureTable), its key columns.
 *
 * src/format/change.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_index.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "format/change.h"

/*
 * The names of the primary key columns of rel, in key order, or NULL if it
 * has no primary key.
 */
char	  **
outbox_primary_key(Relation rel, int *nkeys)
{
	Oid			pkey = RelationGetPrimaryKeyIndex(rel);
	HeapTuple	indtuple;
	Form_pg_index index;
	char	  **names;

	*nkeys = 0;
	if (!OidIsValid(pkey))
		return NULL;
	indtuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkey));
	if (!HeapTupleIsValid(indtuple))
		elog(ERROR, "cache lookup failed for index %u", pkey);
	index = (Form_pg_index) GETSTRUCT(indtuple);
	*nkeys = index->indnkeyatts;
	names = palloc(*nkeys * sizeof(char *));
	for (int i = 0; i < *nkeys; i++)
		names[i] = get_attname(RelationGetRelid(rel), index->indkey.values[i], false);
	ReleaseSysCache(indtuple);
	return names;
}

/*
 * What the events of rows of rel, given with tupdesc, need to know: the
 * table's names, and where the key columns are in tupdesc.  An unknown key
 * column is an error.
 */
void
outbox_capture_table(const CaptureConfig *config, Relation rel, TupleDesc tupdesc,
					 CaptureTable *table)
{
	char	  **names = config->keys;
	int			nkeys = config->nkeys;

	table->relid = RelationGetRelid(rel);
	table->schema = get_namespace_name(RelationGetNamespace(rel));
	table->table = pstrdup(RelationGetRelationName(rel));
	table->topic = NULL;
	table->tupdesc = tupdesc;
	table->identity = rel->rd_rel->relreplident;
	table->identity_attrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	if (nkeys == 0)
		names = outbox_primary_key(rel, &nkeys);
	table->nkeys = nkeys;
	table->key_attnums = palloc(Max(nkeys, 1) * sizeof(AttrNumber));
	for (int i = 0; i < nkeys; i++)
	{
		int			attnum = SPI_fnumber(tupdesc, names[i]);

		if (attnum == SPI_ERROR_NOATTRIBUTE || attnum <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" does not exist", names[i]),
					 errcontext("table %s", quote_qualified_identifier(table->schema, table->table))));
		table->key_attnums[i] = attnum;
	}
}
