# Makefile for the outbox extension (PGXS)

MODULE_big = outbox
OBJS = \
	src/base/catalog.o \
	src/base/event.o \
	src/base/guc.o \
	src/capture/attach.o \
	src/capture/capture.o \
	src/capture/router.o \
	src/capture/snapshot.o \
	src/capture/tables.o \
	src/capture/trigger_cache.o \
	src/format/avro.o \
	src/format/avro_binary.o \
	src/format/change.o \
	src/format/cloudevents.o \
	src/format/debezium.o \
	src/format/debezium_avro.o \
	src/format/debezium_defaults.o \
	src/format/debezium_json.o \
	src/format/decimal.o \
	src/format/format.o \
	src/format/outbox.o \
	src/format/topics.o \
	src/kafka/kafka.o \
	src/kafka/properties.o \
	src/kafka/registry.o \
	src/launcher/clusters.o \
	src/launcher/launcher.o \
	src/launcher/status.o \
	src/outbox.o \
	src/queue/claim.o \
	src/queue/enqueue.o \
	src/queue/histogram.o \
	src/queue/operator.o \
	src/queue/reader.o \
	src/queue/reader_row.o \
	src/queue/record.o \
	src/queue/restore.o \
	src/queue/retention.o \
	src/queue/retries.o \
	src/queue/stats.o \
	src/queue/utility.o \
	src/worker/publish.o \
	src/worker/standby.o \
	src/worker/worker.o

EXTENSION = outbox
# the scripts, and beside them the queries file of
# prometheus-postgres-exporter and Prometheus' alert rules with their tests
# (docs/monitoring.md)
DATA = outbox--1.0.sql outbox--1.0--1.1.sql outbox--1.1--1.2.sql outbox--1.2.sql \
	outbox--1.2--1.3.sql outbox--1.3.sql outbox--1.3--1.4.sql \
	monitoring/outbox_prometheus.yaml monitoring/outbox-alerts.yml \
	monitoring/outbox-alerts.test.yml
PGFILEDESC = "outbox - transactional outbox publishing to Kafka"

REGRESS = setup enqueue state_machine privileges settings capture capture_cache router_cache reference retry stats security headers debezium snapshot_guards upgrade drop dump secrets topics registry cloudevents
ISOLATION = claim order commit_order rotate drop_concurrent snapshot topic_settings router_ddl
REGRESS_OPTS = --temp-config=$(srcdir)/specs/temp.conf
ISOLATION_OPTS = --temp-config=$(srcdir)/specs/temp.conf

RDKAFKA_CFLAGS := $(shell pkg-config --cflags rdkafka)
RDKAFKA_LIBS := $(shell pkg-config --libs rdkafka)
# HTTP to the schema registry, and Avro
FORMAT_CFLAGS := $(shell pkg-config --cflags libcurl avro-c)
FORMAT_LIBS := $(shell pkg-config --libs libcurl avro-c)
PG_CPPFLAGS = -I$(srcdir)/src $(RDKAFKA_CFLAGS) $(FORMAT_CFLAGS)
SHLIB_LINK = $(RDKAFKA_LIBS) $(FORMAT_LIBS)

# make installcheck is ours (below): pg_regress and isolation, then the
# test databases dropped.  The TAP tests in t/, each with servers of its
# own, are for prove (test/run.sh runs them), with their helpers in
# t/OutboxTest.pm.
NO_INSTALLCHECK = 1

# Test helpers, outside the default target: a Kafka-protocol broker built
# on librdkafka's mock cluster, which the TAP tests, the demo and the
# benchmarks start, the bare producer that the drain benchmark compares
# with, and a module of SQL functions over the schema registry client for
# t/029 (never installed).
TEST_PROGRAMS = test/mock_broker test/bench/producer test/registry_probe.so
EXTRA_CLEAN = $(TEST_PROGRAMS) test/registry_probe.d tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# rebuild what includes a header when the header changes (in CFLAGS: the
# bitcode compile takes CPPFLAGS, and would write each .d for the .bc)
override CFLAGS += -MMD -MP
-include $(OBJS:.o=.d)
EXTRA_CLEAN += $(OBJS:.o=.d)

test-programs: $(TEST_PROGRAMS)
.PHONY: test-programs

# Against the server of PGHOST, PGPORT, as PGUSER (a superuser): both
# suites, whichever fails, then the extension's events discarded and the
# test databases dropped, leaving nothing behind.
TEST_DATABASES = $(CONTRIB_TESTDB) $(ISOLATION_TESTDB)
installcheck: test-programs
	@status=0; \
	$(if $(REGRESS),$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS) || status=1;) \
	$(if $(ISOLATION),$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION) || status=1;) \
	for db in $(TEST_DATABASES); do \
		'$(bindir)/psql' -X -q -d "$$db" -c 'SET client_min_messages = warning' \
			-c 'DO $$d$$ BEGIN IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = $$o$$outbox$$o$$) THEN PERFORM outbox_discard(); DROP EXTENSION outbox CASCADE; END IF; END $$d$$' \
			2>/dev/null; \
		'$(bindir)/psql' -X -q -d postgres -c "DROP DATABASE IF EXISTS $$db" || status=1; \
	done; \
	exit $$status
.PHONY: installcheck

test/%: test/%.c
	$(CC) -O2 -Wall -Wextra -Werror $(RDKAFKA_CFLAGS) -o $@ $< $(RDKAFKA_LIBS)

# its undefined symbols are the library's, which the server has loaded
test/registry_probe.so: test/registry_probe.c src/kafka/registry.h
	$(CC) $(CFLAGS) $(CFLAGS_SL) $(CPPFLAGS) -shared -o $@ $<
