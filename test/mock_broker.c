/*-------------------------------------------------------------------------
 *
 * mock_broker.c
 *		A Kafka-protocol broker for the tests, the demo and trying the
 *		extension, built on librdkafka's mock cluster.
 *
 * The brokers listen on loopback TCP ports; any Kafka client (the outbox
 * worker, kcat) talks to them over the wire.  The first line printed on
 * stdout is the bootstrap list.  Then each line read, from stdin or from
 * the control FIFO, is a command, answered on stdout by one line, "ok" or
 * "error: ..." (USAGE below lists them).
 *
 * stdin is read unless it is a terminal whose foreground is another
 * process group (a broker started with & in an interactive shell): reading
 * it would stop the broker with SIGTTIN.  A broker put in the background
 * later reads no more from its terminal (SIGTTIN is ignored: the read
 * fails) and keeps serving.  The end of stdin leaves the brokers running;
 * SIGTERM or SIGINT stops them.
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* ppoll */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define PRODUCE_API_KEY 0
#define MAX_BROKERS 64

static const char USAGE[] =
"Usage: mock_broker [--control FIFO] [BROKERS]\n"
"\n"
"A Kafka cluster of BROKERS brokers (1 by default, at most 64) on loopback\n"
"ports, in memory: topics are created as they are written to, with 4\n"
"partitions.  Prints the bootstrap list (host:port,...) on its first line,\n"
"then serves until interrupted (Ctrl-C, SIGTERM).\n"
"\n"
"Commands, one per line, each answered on stdout by \"ok\" or \"error: ...\":\n"
"  down ID, up ID            take broker ID (1..BROKERS) down or up; -1: all\n"
"                            (down -1 is an outage of the whole cluster,\n"
"                            up -1 its end)\n"
"  create TOPIC PARTITIONS   create a topic\n"
"  produce_errors COUNT ERR  fail the next COUNT Produce requests with Kafka\n"
"                            error code ERR\n"
"  topic_error TOPIC ERR     make metadata report ERR for TOPIC (0 clears)\n"
"  rtt ID MS                 add MS milliseconds of latency to broker ID\n"
"\n"
"They are read from stdin (typed, in a terminal), unless stdin is a terminal\n"
"and the broker runs in the background (mock_broker &), and from FIFO:\n"
"  --control FIFO            read commands written to FIFO, a named pipe,\n"
"                            made if it does not exist (and then removed at\n"
"                            exit): echo 'down -1' > FIFO\n"
"  --help                    print this and exit\n";

/* a file commands are read from, and its partial line */
typedef struct CommandInput
{
	int			fd;
	size_t		len;
	char		line[1024];
} CommandInput;

static volatile sig_atomic_t stop_requested = 0;

static void
handle_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

/* Print the usage to stderr and exit 2: the command line is wrong. */
static void
usage_error(const char *problem)
{
	fprintf(stderr, "mock_broker: %s\n%.*s(mock_broker --help says more)\n", problem,
			(int) (strchr(USAGE, '\n') - USAGE + 1), USAGE);
	exit(2);
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

/*
 * Read what in has to give and run each whole line; a line longer than the
 * buffer is cut.  Returns false once in has ended or failed (a terminal
 * read from the background).
 */
static bool
read_commands(rd_kafka_mock_cluster_t *mcluster, CommandInput *in)
{
	ssize_t		n = read(in->fd, in->line + in->len, sizeof(in->line) - 1 - in->len);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	in->len += n;
	for (;;)
	{
		char	   *newline = memchr(in->line, '\n', in->len);
		size_t		used;

		if (newline != NULL)
			used = newline - in->line + 1;
		else if (in->len == sizeof(in->line) - 1)
			used = in->len;
		else
			break;
		in->line[used - 1] = '\0';
		in->line[strcspn(in->line, "\r")] = '\0';
		printf("%s\n", run_command(mcluster, in->line));
		fflush(stdout);
		memmove(in->line, in->line + used, in->len - used);
		in->len -= used;
	}
	return true;
}

/*
 * Open the control FIFO at path, made if absent (*made then says so), for
 * reading; opened for writing too, so that a writer closing it is no end.
 */
static int
open_control(const char *path, bool *made)
{
	struct stat st;
	int			fd;

	*made = false;
	if (mkfifo(path, 0600) == 0)
		*made = true;
	else if (errno != EEXIST)
	{
		fprintf(stderr, "mock_broker: could not make FIFO \"%s\": %s\n", path, strerror(errno));
		exit(1);
	}
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
	{
		fprintf(stderr, "mock_broker: \"%s\" is not a FIFO it can read: %s\n", path,
				fd < 0 ? strerror(errno) : "another kind of file");
		exit(1);
	}
	return fd;
}

int
main(int argc, char **argv)
{
	int			broker_count = 1;
	const char *control = NULL;
	bool		control_made = false;
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mcluster;
	struct sigaction stop;
	sigset_t	blocked;
	sigset_t	unblocked;
	CommandInput inputs[2];
	int			ninputs = 0;
	bool		counted = false;

	for (int i = 1; i < argc; i++)
	{
		char	   *end;
		long		n;

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
		{
			fputs(USAGE, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--control") == 0)
		{
			if (++i == argc || argv[i][0] == '\0')
				usage_error("--control needs the path of a FIFO");
			control = argv[i];
			continue;
		}
		errno = 0;
		n = strtol(argv[i], &end, 10);
		if (argv[i][0] == '-' || counted || *end != '\0' || end == argv[i] || errno != 0 ||
			n < 1 || n > MAX_BROKERS)
		{
			snprintf(errstr, sizeof(errstr), "unexpected argument \"%s\"", argv[i]);
			usage_error(errstr);
		}
		broker_count = (int) n;
		counted = true;
	}

	/*
	 * A stop is taken by this thread only, while it waits for a command
	 * (ppoll), so that it cannot come between the check and the wait:
	 * blocked before librdkafka starts its threads, which inherit the mask.
	 */
	memset(&stop, 0, sizeof(stop));
	stop.sa_handler = handle_stop;
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigprocmask(SIG_BLOCK, &blocked, &unblocked);

	/*
	 * The mock cluster needs a handle to run in; a producer that never
	 * produces is the lightest one.  Like a real broker, it answers without
	 * Nagle's delay.
	 */
	conf = rd_kafka_conf_new();
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

	if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) == getpgrp())
		inputs[ninputs++] = (CommandInput) {.fd = STDIN_FILENO};
	if (control != NULL)
		inputs[ninputs++] = (CommandInput) {.fd = open_control(control, &control_made)};

	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mcluster));
	fflush(stdout);

	while (!stop_requested)
	{
		struct pollfd fds[2];

		for (int i = 0; i < ninputs; i++)
			fds[i] = (struct pollfd) {.fd = inputs[i].fd, .events = POLLIN};
		if (ppoll(fds, ninputs, NULL, &unblocked) < 0)
			continue;			/* EINTR: a stop, perhaps */
		for (int i = ninputs - 1; i >= 0; i--)
		{
			if (fds[i].revents == 0 || read_commands(mcluster, &inputs[i]))
				continue;
			/* stdin ended: serve on, from the FIFO if there is one */
			inputs[i] = inputs[--ninputs];
		}
	}

	if (control_made)
		unlink(control);
	rd_kafka_mock_cluster_destroy(mcluster);
	rd_kafka_destroy(rk);
	return 0;
}
