/*
 * producer.c
 *		The baselines of the drain and latency benchmarks: a bare librdkafka
 *		producer that sends COUNT events from memory to the broker, with
 *		what the worker sends (the same ~200-byte JSON payloads, COUNT % KEYS
 *		keys, an event_id header) and the settings its guarantees need
 *		(idempotence, acks=all).
 *
 *		Without RATE, as fast as it can: prints how many events per second
 *		were acknowledged (the ceiling of the drain).  With RATE, RATE
 *		events per second, each sent at once (linger.ms=0): prints the
 *		median, 99th percentile and maximum milliseconds from produce to
 *		delivery report (the floor of the latency).
 *
 * Usage: producer BROKERS TOPIC COUNT KEYS [RATE]
 *
 * test/bench/producer.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

static long delivered = 0;
static long refused = 0;
/* with a rate: when each event was produced, and its latency */
static double *sent_at = NULL;
static double *latency_ms = NULL;

static double seconds(void);

static void
delivery_report(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	(void) rk;
	(void) opaque;
	if (msg->err)
		refused++;
	else
	{
		if (latency_ms != NULL)
		{
			long		i = (long) (intptr_t) msg->_private;

			latency_ms[delivered] = 1000.0 * (seconds() - sent_at[i]);
		}
		delivered++;
	}
}

static int
double_cmp(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static void
conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char		errbuf[512];

	if (rd_kafka_conf_set(conf, name, value, errbuf, sizeof(errbuf)) != RD_KAFKA_CONF_OK)
	{
		fprintf(stderr, "producer: %s: %s\n", name, errbuf);
		exit(1);
	}
}

static double
seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	char		errbuf[512];
	long		count;
	long		keys;
	double		rate = 0;
	double		start;

	if (argc != 5 && argc != 6)
	{
		fprintf(stderr, "usage: producer BROKERS TOPIC COUNT KEYS [RATE]\n");
		return 2;
	}
	count = atol(argv[3]);
	keys = atol(argv[4]);
	if (argc == 6)
	{
		rate = atof(argv[5]);
		sent_at = calloc(count + 1, sizeof(double));
		latency_ms = calloc(count + 1, sizeof(double));
	}

	conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", argv[1]);
	conf_set(conf, "enable.idempotence", "true");
	conf_set(conf, "acks", "all");
	conf_set(conf, "partitioner", "murmur2_random");
	conf_set(conf, "socket.nagle.disable", "true");
	if (rate > 0)
		conf_set(conf, "linger.ms", "0");
	rd_kafka_conf_set_dr_msg_cb(conf, delivery_report);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errbuf, sizeof(errbuf));
	if (rk == NULL)
	{
		fprintf(stderr, "producer: %s\n", errbuf);
		return 1;
	}

	/* the topic's metadata and the connection are looked up first */
	if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_VALUE("warm-up", 7),
						  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END) ||
		rd_kafka_flush(rk, 10000))
	{
		fprintf(stderr, "producer: the broker does not answer\n");
		return 1;
	}
	delivered = 0;

	start = seconds();
	for (long i = 1; i <= count; i++)
	{
		char		payload[256];
		char		key[32];
		char		event_id[48];
		int			payload_len;
		rd_kafka_resp_err_t err;

		/* bench_payload(i) of test/bench/setup.sql, as jsonb prints it */
		payload_len = snprintf(payload, sizeof(payload),
							   "{\"note\": \"%.40s\", \"items\": [{\"qty\": 2, \"sku\": \"sku-%ld\", "
							   "\"price\": 19.99}], \"total\": 39.98, \"status\": \"paid\", "
							   "\"currency\": \"EUR\", \"customer\": \"customer-%ld\", \"order_id\": %ld}",
							   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i % 97, i % 1000, i);
		snprintf(key, sizeof(key), "%ld", i % keys);
		snprintf(event_id, sizeof(event_id), "00000000-0000-4000-8000-%012ld", i % 1000000000000L);
		if (rate > 0)
		{
			double		wait;

			/* wait for the event's turn, serving delivery reports */
			while ((wait = start + (i - 1) / rate - seconds()) > 0)
			{
				rd_kafka_poll(rk, 0);
				usleep((useconds_t) (wait * 1e6 / 2) + 1);
			}
			sent_at[i] = seconds();
		}
		do
		{
			err = rd_kafka_producev(rk,
									RD_KAFKA_V_TOPIC(argv[2]),
									RD_KAFKA_V_KEY(key, strlen(key)),
									RD_KAFKA_V_VALUE(payload, payload_len),
									RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
									RD_KAFKA_V_HEADER("event_id", event_id, 36),
									RD_KAFKA_V_OPAQUE((void *) (intptr_t) i),
									RD_KAFKA_V_END);
			if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 10);
		} while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		if (err)
		{
			fprintf(stderr, "producer: %s\n", rd_kafka_err2str(err));
			return 1;
		}
		rd_kafka_poll(rk, 0);
	}
	while (delivered + refused < count)
		rd_kafka_poll(rk, rate > 0 ? 1 : 100);

	if (rate > 0)
	{
		qsort(latency_ms, delivered, sizeof(double), double_cmp);
		printf("%.1f %.1f %.1f\n", latency_ms[delivered / 2],
			   latency_ms[(long) (delivered * 0.99)], latency_ms[delivered - 1]);
	}
	else
		printf("%.0f\n", delivered / (seconds() - start));
	rd_kafka_destroy(rk);
	return refused == 0 ? 0 : 1;
}
