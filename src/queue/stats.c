/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Delivery statistics per topic and 10-second bucket: deliveries,
 *		refused attempts, abandoned events and a latency histogram, summed
 *		in memory and written to outbox_publish_stats with one statement;
 *		the worker's, of its transactions, kept until they are written, at
 *		most once a second.  docs/design.md, "Storage: a log that
 *		publishing does not rewrite", says why.
 *
 * src/queue/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/event.h"
#include "queue/histogram.h"
#include "queue/stats.h"

#define BUCKET_USECS (10 * USECS_PER_SEC)
/* how often the worker writes the statistics summed in memory */
#define STATS_INTERVAL_MS 1000

typedef struct StatsKey
{
	char		topic[OUTBOX_TOPIC_SIZE];
	TimestampTz bucket;
} StatsKey;

typedef struct StatsEntry
{
	StatsKey	key;
	int64		published;
	int64		failed;
	int64		abandoned;
	double		latency_ms_sum;
	int64		histogram[OUTBOX_HISTOGRAM_BUCKETS];
} StatsEntry;

/*
 * Statistics ($1 topics, $2 buckets, $3 deliveries, $4 refused attempts,
 * $5 abandoned events, $6 latency sums, $7 the histograms one after the
 * other) added to what the table holds for their topic and bucket.
 */
static OutboxPlan write_plan = {
	"INSERT INTO %1$s.outbox_publish_stats AS s"
	"       (topic, bucket, published, failed, abandoned, latency_ms_sum, latency_histogram)"
	" SELECT u.topic, u.bucket, u.published, u.failed, u.abandoned, u.ms,"
	"        CASE WHEN u.published > 0 THEN"
	"          ARRAY(SELECT h.v FROM unnest($7[(u.i::integer - 1) * 128 + 1 : u.i::integer * 128])"
	"                                WITH ORDINALITY AS h(v, o) ORDER BY h.o)"
	"        ELSE '{}' END"
	"   FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[],"
	"               $6::float8[]) WITH ORDINALITY AS u(topic, bucket, published, failed, abandoned, ms, i)"
	" ON CONFLICT (topic, bucket) DO UPDATE"
	"    SET published = s.published + excluded.published,"
	"        failed = s.failed + excluded.failed,"
	"        abandoned = s.abandoned + excluded.abandoned,"
	"        latency_ms_sum = s.latency_ms_sum + excluded.latency_ms_sum,"
	"        latency_histogram = (SELECT coalesce(array_agg(coalesce(h.a, 0) + coalesce(h.b, 0) ORDER BY h.o), '{}')"
	"                               FROM unnest(s.latency_histogram, excluded.latency_histogram)"
	"                                    WITH ORDINALITY AS h(a, b, o))",
	7, {TEXTARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID,
	FLOAT8ARRAYOID, INT8ARRAYOID}
};

/*
 * Empty statistics, in memory context cxt: sums per topic and bucket.  A
 * bucket starts at a multiple of 10 s since 1970, as date_bin() puts it.
 */
HTAB *
outbox_stats_create(MemoryContext cxt)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(StatsKey);
	ctl.entrysize = sizeof(StatsEntry);
	ctl.hcxt = cxt;
	return hash_create("outbox delivery statistics", 16, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* The entry of key, zero at first. */
static StatsEntry *
entry_of(HTAB *stats, const StatsKey *key)
{
	bool		found;
	StatsEntry *entry = hash_search(stats, key, HASH_ENTER, &found);

	if (!found)
		memset((char *) entry + sizeof(StatsKey), 0, sizeof(StatsEntry) - sizeof(StatsKey));
	return entry;
}

/*
 * Count one outcome of an event of topic (a text datum), created at
 * created_at, recorded at now.
 */
void
outbox_stats_add(HTAB *stats, Datum topic, OutboxStatsOutcome outcome,
				 TimestampTz created_at, TimestampTz now)
{
	text	   *t = DatumGetTextPP(topic);
	StatsKey	key;
	StatsEntry *entry;
	/* 1970 and 2000, the epoch of TimestampTz, are 10 s apart many times */
	TimestampTz offset = now % BUCKET_USECS;

	memset(&key, 0, sizeof(key));
	memcpy(key.topic, VARDATA_ANY(t), Min(VARSIZE_ANY_EXHDR(t), OUTBOX_TOPIC_SIZE - 1));
	key.bucket = now - (offset < 0 ? offset + BUCKET_USECS : offset);
	entry = entry_of(stats, &key);
	switch (outcome)
	{
		case OUTBOX_STATS_PUBLISHED:
			{
				double		latency_ms = (now - created_at) / 1000.0;

				entry->published++;
				entry->latency_ms_sum += latency_ms;
				entry->histogram[outbox_latency_bucket(latency_ms)]++;
				break;
			}
		case OUTBOX_STATS_FAILED:
			entry->failed++;
			break;
		case OUTBOX_STATS_ABANDONED:
			entry->abandoned++;
			break;
	}
}

/* Add the statistics of from to into. */
static void
stats_merge(HTAB *into, HTAB *from)
{
	HASH_SEQ_STATUS status;
	StatsEntry *add;

	hash_seq_init(&status, from);
	while ((add = hash_seq_search(&status)) != NULL)
	{
		StatsEntry *entry = entry_of(into, &add->key);

		entry->published += add->published;
		entry->failed += add->failed;
		entry->abandoned += add->abandoned;
		entry->latency_ms_sum += add->latency_ms_sum;
		for (int b = 0; b < OUTBOX_HISTOGRAM_BUCKETS; b++)
			entry->histogram[b] += add->histogram[b];
	}
}

/* Forget what stats holds. */
static void
stats_clear(HTAB *stats)
{
	HASH_SEQ_STATUS status;
	StatsEntry *entry;

	hash_seq_init(&status, stats);
	while ((entry = hash_seq_search(&status)) != NULL)
		hash_search(stats, &entry->key, HASH_REMOVE, NULL);
}

/*
 * Add stats to outbox_publish_stats, with one statement (nothing if they
 * are empty).  Takes a connection to SPI.
 */
void
outbox_stats_write(const OutboxExtension *ext, HTAB *stats)
{
	long		rows = hash_get_num_entries(stats);
	Datum	   *columns[6];
	Datum	   *histograms;
	Datum		values[7];
	int			r = 0;
	HASH_SEQ_STATUS status;
	StatsEntry *entry;
	static const Oid types[6] = {TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID,
	INT8OID, FLOAT8OID};

	if (rows == 0)
		return;
	for (int c = 0; c < lengthof(columns); c++)
		columns[c] = palloc(rows * sizeof(Datum));
	histograms = palloc(rows * OUTBOX_HISTOGRAM_BUCKETS * sizeof(Datum));
	hash_seq_init(&status, stats);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		columns[0][r] = CStringGetTextDatum(entry->key.topic);
		columns[1][r] = TimestampTzGetDatum(entry->key.bucket);
		columns[2][r] = Int64GetDatum(entry->published);
		columns[3][r] = Int64GetDatum(entry->failed);
		columns[4][r] = Int64GetDatum(entry->abandoned);
		columns[5][r] = Float8GetDatum(entry->latency_ms_sum);
		for (int b = 0; b < OUTBOX_HISTOGRAM_BUCKETS; b++)
			histograms[r * OUTBOX_HISTOGRAM_BUCKETS + b] = Int64GetDatum(entry->histogram[b]);
		r++;
	}
	for (int c = 0; c < lengthof(columns); c++)
		values[c] = outbox_array(columns[c], NULL, rows, types[c]);
	values[6] = outbox_array(histograms, NULL, rows * OUTBOX_HISTOGRAM_BUCKETS, INT8OID);
	SPI_connect();
	outbox_run(ext, &write_plan, values, -1);
	SPI_finish();
}

/*
 * The worker's statistics: those of committed transactions not written
 * yet, in stats_cxt; those of the transaction in progress; when they were
 * last written, and whether the transaction in progress writes them.
 */
static MemoryContext stats_cxt = NULL;
static HTAB *unwritten_stats = NULL;
static HTAB *run_stats = NULL;
static TimestampTz stats_written_at = 0;
static bool stats_writing = false;

/*
 * Begin summing the statistics of a transaction of the worker, in memory
 * context cxt, forgetting those of the last one unless it committed.
 */
void
outbox_stats_begin(MemoryContext cxt)
{
	if (stats_cxt == NULL)
	{
		stats_cxt = AllocSetContextCreate(TopMemoryContext, "outbox unwritten statistics",
										  ALLOCSET_SMALL_SIZES);
		unwritten_stats = outbox_stats_create(stats_cxt);
	}
	run_stats = outbox_stats_create(cxt);
	stats_writing = false;
}

/* The statistics of the worker's transaction in progress, to add to. */
HTAB *
outbox_stats_current(void)
{
	return run_stats;
}

/*
 * Write the statistics of the committed batches and of this transaction's
 * if it is time to (now: at once); outbox_stats_committed() says they
 * were, after commit.  Takes a connection to SPI.
 */
void
outbox_stats_write_due(const OutboxExtension *ext, bool now)
{
	HTAB	   *all;

	if (!now && !TimestampDifferenceExceeds(stats_written_at, GetCurrentTimestamp(),
											STATS_INTERVAL_MS))
		return;
	if (hash_get_num_entries(unwritten_stats) + hash_get_num_entries(run_stats) == 0)
		return;
	all = outbox_stats_create(CurrentMemoryContext);
	stats_merge(all, unwritten_stats);
	stats_merge(all, run_stats);
	outbox_stats_write(ext, all);
	stats_writing = true;
}

/*
 * After the commit of a turn's transaction: the statistics it wrote are
 * written, those it summed are kept until they are.
 */
void
outbox_stats_committed(void)
{
	if (stats_writing)
	{
		stats_clear(unwritten_stats);
		stats_written_at = GetCurrentTimestamp();
	}
	else
		stats_merge(unwritten_stats, run_stats);
	stats_writing = false;
}
