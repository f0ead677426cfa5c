/*-------------------------------------------------------------------------
 *
 * debezium_json.h
 *		Change events as Debezium's PostgreSQL connector writes them with
 *		the JSON converter and schemas.enable=false: column values, keys,
 *		the envelope and the topic.
 *
 * src/format/debezium_json.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_DEBEZIUM_JSON_H
#define OUTBOX_DEBEZIUM_JSON_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

/* source.version of every change event */
#define OUTBOX_DEBEZIUM_VERSION "outbox-1.4"

/* decimal.handling.mode: how numeric, decimal and money are written */
typedef enum DebeziumDecimals
{
	DEBEZIUM_DECIMALS_PRECISE,	/* base64 of the unscaled value */
	DEBEZIUM_DECIMALS_STRING,	/* the digits */
	DEBEZIUM_DECIMALS_DOUBLE	/* a number */
} DebeziumDecimals;

/*
 * A column's default as the connector reads it (src/format/debezium_defaults.c):
 * none, a string, or a value of the column's type, written as a value of
 * the column is.
 */
typedef struct DebeziumDefault
{
	bool		has;			/* the connector has a default for it */
	char	   *string;			/* the default, a string; NULL: value */
	Datum		value;			/* the default, of the column's type */
} DebeziumDefault;

/* the defaults of a table's columns, by attribute number - 1 */
typedef struct DebeziumDefaults
{
	int			natts;
	DebeziumDefault columns[FLEXIBLE_ARRAY_MEMBER];
} DebeziumDefaults;

/* how values are written: the connector's settings, as the trigger's arguments say */
typedef struct DebeziumOptions
{
	DebeziumDecimals decimals;
	bool		hstore_json;	/* hstore.handling.mode=json; else its text (1.2) */
	bool		schemas;		/* the JSON converter's schemas.enable */
	bool		avro;			/* keys and values as Confluent's AvroConverter
								 * writes them, else the JSON converter */
	bool		named_types;	/* enum arrays' items required, tsvector and
								 * ltree named, as the connector has them;
								 * false before 1.4 */
	bool		replace_nulls;	/* a null written as its column's default:
								 * replace.null.with.default */
	const DebeziumDefaults *defaults;	/* the columns' defaults, in their
										 * schemas; NULL: none (before 1.4) */
} DebeziumOptions;

/* what a change event says of where it comes from */
typedef struct DebeziumSource
{
	const char *prefix;			/* source.name, the topic prefix */
	const char *schema;
	const char *table;
	const char *snapshot;		/* source.snapshot: "false", "first", "true", "last" */
	TimestampTz changed_at;		/* source.ts_ms */
} DebeziumSource;

extern char *outbox_debezium_text(Datum value, Oid typid, int32 typmod);
extern void outbox_debezium_column(StringInfo buf, const DebeziumOptions *options,
								   Datum value, bool isnull, Oid typid, int32 typmod);
extern void outbox_debezium_schema(StringInfo buf, const DebeziumOptions *options,
								   Oid typid, int32 typmod, bool optional);
extern void outbox_debezium_key(StringInfo buf, const DebeziumOptions *options,
								const char *topic, TupleDesc tupdesc, HeapTuple tuple,
								int nkeys, const AttrNumber *attnums);
extern void outbox_debezium_key_schema(StringInfo buf, const DebeziumOptions *options,
									   const char *topic, TupleDesc tupdesc,
									   int nkeys, const AttrNumber *attnums);
extern void outbox_debezium_value_schema(StringInfo buf, const DebeziumOptions *options,
										 const char *topic, TupleDesc tupdesc);
extern void outbox_debezium_envelope(StringInfo buf, const DebeziumOptions *options,
									 const DebeziumSource *source, char op,
									 TupleDesc tupdesc, HeapTuple before,
									 HeapTuple after, const bool *unavailable);
extern char *outbox_debezium_topic(const char *prefix, const char *schema,
								   const char *table);
extern bool outbox_debezium_needs_settings(TupleDesc tupdesc);
extern int	outbox_debezium_pin_settings(TupleDesc tupdesc);
extern void outbox_debezium_unpin_settings(int nestlevel);

#endif							/* OUTBOX_DEBEZIUM_JSON_H */
