/*-------------------------------------------------------------------------
 *
 * histogram.h
 *		The latency histograms of outbox_publish_stats.
 *
 * src/queue/histogram.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef OUTBOX_HISTOGRAM_H
#define OUTBOX_HISTOGRAM_H

#define OUTBOX_HISTOGRAM_BUCKETS 128

extern int	outbox_latency_bucket(double ms);

#endif							/* OUTBOX_HISTOGRAM_H */
