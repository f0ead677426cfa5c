/*-------------------------------------------------------------------------
 *
 * histogram.c
 *		The latency histograms of outbox_publish_stats.
 *
 * A histogram is a bigint[] of HISTOGRAM_BUCKETS counts; a latency of ms
 * milliseconds falls in bucket floor(4 * log2(1 + ms)), so each bucket is
 * 19% wider than the one before and 128 of them reach past a month.  The
 * worker adds one to the statistics with every batch, so these run in C.
 *
 * src/queue/histogram.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "base/catalog.h"
#include "queue/histogram.h"

#define HISTOGRAM_BUCKETS OUTBOX_HISTOGRAM_BUCKETS

PG_FUNCTION_INFO_V1(outbox_latency_histogram);
PG_FUNCTION_INFO_V1(outbox_histogram_add);

static ArrayType *
make_histogram(int64 *counts, int n)
{
	Datum	   *datums = palloc(n * sizeof(Datum));

	for (int i = 0; i < n; i++)
		datums[i] = Int64GetDatum(counts[i]);
	return construct_array(datums, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

/*
 * The bucket of a latency of ms milliseconds.
 */
int
outbox_latency_bucket(double ms)
{
	double		bucket = floor(4.0 * log2(1.0 + Max(ms, 0.0)));

	return (int) Min(bucket, HISTOGRAM_BUCKETS - 1);
}

/*
 * outbox_latency_histogram(latencies_ms float8[]) RETURNS bigint[]
 */
Datum
outbox_latency_histogram(PG_FUNCTION_ARGS)
{
	int64		counts[HISTOGRAM_BUCKETS] = {0};
	Datum	   *latencies;
	bool	   *nulls;
	int			n;

	outbox_entry(fcinfo);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), FLOAT8OID, 8, FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &latencies, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			counts[outbox_latency_bucket(DatumGetFloat8(latencies[i]))]++;
	PG_RETURN_ARRAYTYPE_P(make_histogram(counts, HISTOGRAM_BUCKETS));
}

/* Is a a one-dimensional bigint[] without nulls, whose data can be read as is? */
static bool
plain_histogram(ArrayType *a)
{
	return ARR_NDIM(a) <= 1 && !ARR_HASNULL(a) && ARR_ELEMTYPE(a) == INT8OID;
}

/*
 * outbox_histogram_add(a bigint[], b bigint[]) RETURNS bigint[]: the
 * bucket-wise sum; the shorter one counts as zeros where it ends.
 *
 * As the transition function of outbox_histogram_sum it adds b into a in
 * place once a is as long as b, as float8_accum does with its state: a
 * scrape sums thousands of rows of outbox_publish_stats, and a new array
 * per row cost five times the reading of the rows.
 */
Datum
outbox_histogram_add(PG_FUNCTION_ARGS)
{
	ArrayType  *aa = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *ba = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *a;
	Datum	   *b;
	bool	   *anulls;
	bool	   *bnulls;
	int			na;
	int			nb;
	int64	   *sum;

	outbox_entry(fcinfo);
	if (AggCheckCallContext(fcinfo, NULL) && plain_histogram(aa) && plain_histogram(ba) &&
		ArrayGetNItems(ARR_NDIM(aa), ARR_DIMS(aa)) >= ArrayGetNItems(ARR_NDIM(ba), ARR_DIMS(ba)))
	{
		int64	   *into = (int64 *) ARR_DATA_PTR(aa);
		const int64 *add = (const int64 *) ARR_DATA_PTR(ba);

		nb = ArrayGetNItems(ARR_NDIM(ba), ARR_DIMS(ba));
		for (int i = 0; i < nb; i++)
			into[i] += add[i];
		PG_RETURN_ARRAYTYPE_P(aa);
	}

	deconstruct_array(aa, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &a, &anulls, &na);
	deconstruct_array(ba, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &b, &bnulls, &nb);
	sum = palloc0(Max(Max(na, nb), 1) * sizeof(int64));
	for (int i = 0; i < na; i++)
		sum[i] += anulls[i] ? 0 : DatumGetInt64(a[i]);
	for (int i = 0; i < nb; i++)
		sum[i] += bnulls[i] ? 0 : DatumGetInt64(b[i]);
	PG_RETURN_ARRAYTYPE_P(make_histogram(sum, Max(na, nb)));
}
