/*-------------------------------------------------------------------------
 *
 * mock_broker.c
 *		A Kafka-protocol broker for the tests, built on librdkafka's mock
 *		cluster.
 *
 * The brokers listen on loopback TCP ports; any Kafka client (the outbox
 * worker, kcat) talks to them over the wire.  The first line printed on
 * stdout is the bootstrap list.  Then each line read on stdin is a command,
 * answered by one line, "ok" or "error: ...":
 *
 *		down ID | up ID				take broker ID (1..N, or -1 for all) down/up
 *		create TOPIC PARTITIONS		create a topic
 *		produce_errors COUNT ERR	fail the next COUNT Produce requests with
 *									Kafka error code ERR
 *		topic_error TOPIC ERR		make metadata report ERR for TOPIC (0 clears)
 *		rtt ID MS					add MS of latency to broker ID
 *
 * End of input leaves the brokers running; SIGTERM or SIGINT stops them.
 *
 * Usage: mock_broker [BROKER_COUNT]	(default 1; topics are auto-created
 * with 4 partitions)
 *
 *-------------------------------------------------------------------------
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define PRODUCE_API_KEY 0

static volatile sig_atomic_t stop_requested = 0;

static void
handle_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

/* Run one command line against the cluster; returns the reply text. */
static const char *
run_command(rd_kafka_mock_cluster_t *mcluster, char *line)
{
	char		name[64];
	char		arg[256];
	long		a;
	long		b;

	if (sscanf(line, "down %ld", &a) == 1)
		return rd_kafka_mock_broker_set_down(mcluster, (int32_t) a) ? "error: no such broker" : "ok";
	if (sscanf(line, "up %ld", &a) == 1)
		return rd_kafka_mock_broker_set_up(mcluster, (int32_t) a) ? "error: no such broker" : "ok";
	if (sscanf(line, "rtt %ld %ld", &a, &b) == 2)
		return rd_kafka_mock_broker_set_rtt(mcluster, (int32_t) a, (int) b) ? "error: no such broker" : "ok";
	if (sscanf(line, "create %255s %ld", arg, &a) == 2)
		return rd_kafka_mock_topic_create(mcluster, arg, (int) a, 1) ? "error: cannot create topic" : "ok";
	if (sscanf(line, "produce_errors %ld %ld", &a, &b) == 2)
	{
		rd_kafka_resp_err_t *errs = calloc(a > 0 ? a : 1, sizeof(*errs));

		for (long i = 0; i < a; i++)
			errs[i] = (rd_kafka_resp_err_t) b;
		rd_kafka_mock_push_request_errors_array(mcluster, PRODUCE_API_KEY, (size_t) a, errs);
		free(errs);
		return "ok";
	}
	if (sscanf(line, "topic_error %255s %ld", arg, &a) == 2)
	{
		rd_kafka_mock_topic_set_error(mcluster, arg, (rd_kafka_resp_err_t) a);
		return "ok";
	}
	if (sscanf(line, "%63s", name) == 1)
		return "error: unknown command";
	return "error: empty command";
}

int
main(int argc, char **argv)
{
	int			broker_count = argc > 1 ? atoi(argv[1]) : 1;
	char		errstr[512];
	char		line[1024];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mcluster;
	struct sigaction stop;

	/*
	 * The mock cluster needs a handle to run in; a producer that never
	 * produces is the lightest one.
	 */
	/* like a real broker, answer without Nagle's delay */
	if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK ||
		rd_kafka_conf_set(conf, "socket.nagle.disable", "true", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
	{
		fprintf(stderr, "mock_broker: %s\n", errstr);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
	{
		fprintf(stderr, "mock_broker: %s\n", errstr);
		return 1;
	}
	mcluster = rd_kafka_mock_cluster_new(rk, broker_count);
	if (mcluster == NULL)
	{
		fprintf(stderr, "mock_broker: could not create the mock cluster\n");
		return 1;
	}

	/* no SA_RESTART: a stop must end the wait for a command */
	memset(&stop, 0, sizeof(stop));
	stop.sa_handler = handle_stop;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);

	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mcluster));
	fflush(stdout);

	while (!stop_requested && fgets(line, sizeof(line), stdin) != NULL)
	{
		line[strcspn(line, "\r\n")] = '\0';
		printf("%s\n", run_command(mcluster, line));
		fflush(stdout);
	}
	while (!stop_requested)
		pause();

	rd_kafka_mock_cluster_destroy(mcluster);
	rd_kafka_destroy(rk);
	return 0;
}
