/*-------------------------------------------------------------------------
 *
 * registry_probe.c
 *		A module for the tests only, never installed: SQL functions over the
 *		schema registry client of the extension (src/format/registry.h), so
 *		that t/029_schema_registry.pl can register and fetch schemas before
 *		anything of the product calls them.  Loaded by its path in a server
 *		that preloads outbox, whose symbols it takes.
 *
 * test/registry_probe.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "format/registry.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(registry_probe_register);
PG_FUNCTION_INFO_V1(registry_probe_schema);
PG_FUNCTION_INFO_V1(registry_probe_frame);

/* registry_probe_register(subject text, schema text) RETURNS integer */
Datum
registry_probe_register(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(outbox_registry_register(text_to_cstring(PG_GETARG_TEXT_PP(0)),
											 text_to_cstring(PG_GETARG_TEXT_PP(1))));
}

/* registry_probe_schema(id integer) RETURNS text */
Datum
registry_probe_schema(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(outbox_registry_schema(PG_GETARG_INT32(0))));
}

/* registry_probe_frame(id integer) RETURNS bytea */
Datum
registry_probe_frame(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	outbox_registry_frame(&buf, PG_GETARG_INT32(0));
	PG_RETURN_BYTEA_P(cstring_to_text_with_len(buf.data, buf.len));
}
