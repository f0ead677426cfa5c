/*
 * producer.c
 *		The ceiling for the drain benchmark: a bare librdkafka producer that
 *		sends COUNT events from memory to the broker, with what the worker
 *		sends (the same ~200-byte JSON payloads, COUNT % KEYS keys, an
 *		event_id header) and the settings its guarantees need (idempotence,
 *		acks=all), and prints how many events per second were acknowledged.
 *
 * Usage: producer BROKERS TOPIC COUNT KEYS
 *
 * test/bench/producer.c
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

static long delivered = 0;
static long refused = 0;

static void
delivery_report(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	(void) rk;
	(void) opaque;
	if (msg->err)
		refused++;
	else
		delivered++;
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
	double		start;

	if (argc != 5)
	{
		fprintf(stderr, "usage: producer BROKERS TOPIC COUNT KEYS\n");
		return 2;
	}
	count = atol(argv[3]);
	keys = atol(argv[4]);

	conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", argv[1]);
	conf_set(conf, "enable.idempotence", "true");
	conf_set(conf, "acks", "all");
	conf_set(conf, "partitioner", "murmur2_random");
	conf_set(conf, "socket.nagle.disable", "true");
	rd_kafka_conf_set_dr_msg_cb(conf, delivery_report);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errbuf, sizeof(errbuf));
	if (rk == NULL)
	{
		fprintf(stderr, "producer: %s\n", errbuf);
		return 1;
	}

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
		do
		{
			err = rd_kafka_producev(rk,
									RD_KAFKA_V_TOPIC(argv[2]),
									RD_KAFKA_V_KEY(key, strlen(key)),
									RD_KAFKA_V_VALUE(payload, payload_len),
									RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
									RD_KAFKA_V_HEADER("event_id", event_id, 36),
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
		rd_kafka_poll(rk, 100);

	printf("%.0f\n", delivered / (seconds() - start));
	rd_kafka_destroy(rk);
	return refused == 0 ? 0 : 1;
}
