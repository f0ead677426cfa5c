# Makefile for the outbox extension (PGXS)

MODULE_big = outbox
OBJS = \
	src/capture.o \
	src/catalog.o \
	src/claim.o \
	src/debezium.o \
	src/enqueue.o \
	src/event.o \
	src/guc.o \
	src/histogram.o \
	src/kafka.o \
	src/launcher.o \
	src/operator.o \
	src/outbox.o \
	src/reader.o \
	src/reader_row.o \
	src/record.o \
	src/restore.o \
	src/retention.o \
	src/router.o \
	src/snapshot.o \
	src/standby.o \
	src/stats.o \
	src/status.o \
	src/topics.o \
	src/utility.o \
	src/worker.o

EXTENSION = outbox
# the scripts, and the queries file of prometheus-postgres-exporter
# (docs/monitoring.md), installed beside them
DATA = outbox--1.0.sql outbox--1.0--1.1.sql outbox--1.1--1.2.sql outbox--1.2.sql \
	outbox--1.2--1.3.sql \
	monitoring/outbox_prometheus.yaml
PGFILEDESC = "outbox - transactional outbox publishing to Kafka"

REGRESS = setup enqueue state_machine privileges settings capture retry stats security headers debezium upgrade drop dump secrets topics
ISOLATION = claim order commit_order rotate drop_concurrent snapshot
REGRESS_OPTS = --temp-config=$(srcdir)/specs/temp.conf
ISOLATION_OPTS = --temp-config=$(srcdir)/specs/temp.conf

RDKAFKA_CFLAGS := $(shell pkg-config --cflags rdkafka)
RDKAFKA_LIBS := $(shell pkg-config --libs rdkafka)
PG_CPPFLAGS = -I$(srcdir)/src $(RDKAFKA_CFLAGS)
SHLIB_LINK = $(RDKAFKA_LIBS)

# TAP tests in t/ (make installcheck runs them, each with servers of its
# own), with their helpers in t/OutboxTest.pm
TAP_TESTS = 1
PROVE_FLAGS = -I $(srcdir)/t

# Test helpers, outside the default target: a Kafka-protocol broker built
# on librdkafka's mock cluster, which the TAP tests, the demo and the
# benchmarks start, and the bare producer that the drain benchmark
# compares with.
TEST_PROGRAMS = test/mock_broker test/bench/producer
EXTRA_CLEAN = $(TEST_PROGRAMS) tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# rebuild what includes a header when the header changes
override CPPFLAGS += -MMD -MP
-include $(OBJS:.o=.d)
EXTRA_CLEAN += $(OBJS:.o=.d)

test-programs: $(TEST_PROGRAMS)
installcheck: test-programs
.PHONY: test-programs

test/%: test/%.c
	$(CC) -O2 -Wall -Wextra -Werror $(RDKAFKA_CFLAGS) -o $@ $< $(RDKAFKA_LIBS)
