#!/bin/bash
#
# What monitoring costs with a backlog: the queries of
# monitoring/outbox_prometheus.yaml (one Prometheus scrape) and
# SELECT * FROM outbox_stats, run as a role with only the monitoring grants,
# with 1,000 and then 10,000,000 unread events in the log (the worker off
# for the database, as during a long Kafka outage), then with a transaction
# of 1,000,000 events in progress at the end of the log, and with 100
# transactions in the reader's list of running ones.  Each figure is the
# median of RUNS runs, in ms, as psql's \timing sees it; with
# prometheus-postgres-exporter installed, also the exporter's own scrape
# duration.  Target: the same cost whatever the backlog (at most 1.5 times
# the cost with 1,000 unread events).
#
# Usage: test/bench/monitoring.sh	(about 3 minutes on 2 cores)

PORT=54345
. "$(dirname "$0")/common.sh" "$@"
QUERIES=$ROOT/monitoring/outbox_prometheus.yaml
EXPORTER=/usr/bin/prometheus-postgres-exporter
UNREAD_N=10000000
SMALL_N=1000
RUNS=15
TOPICS=10

start_broker
# the server's 4 GB removed once it has stopped; the logs stay in $WORK
at_exit 'rm -rf "$WORK/data"'
start_server "$WORK/data" bench "shared_buffers = '2GB'" "max_wal_size = '16GB'" "checkpoint_timeout = '30min'"
EXPORTER_PID=
at_exit '[ -z "$EXPORTER_PID" ] || kill "$EXPORTER_PID" 2>/dev/null'

createdb bench
psql -X -q -d postgres -c "ALTER DATABASE bench SET outbox.enabled = off" \
	-c "CREATE ROLE prometheus LOGIN"
sql "CREATE EXTENSION outbox"
# the grants of docs/monitoring.md
sql "GRANT SELECT ON outbox_stats, outbox_publish_stats, outbox_health, outbox_topic_settings
		 TO prometheus;
	 GRANT EXECUTE ON FUNCTION outbox_unread_topics(), outbox_worker_status(),
		 outbox_cluster_status(), outbox_topic(text), outbox_registry_warning(),
		 outbox_histogram_sum(bigint[]), outbox_histogram_quantile(bigint[], double precision)
		 TO prometheus"

# two hours of statistics for each topic, as a busy worker leaves them: a
# row per 10-second bucket with a full histogram, and the folded row
sql "INSERT INTO outbox_publish_stats (topic, bucket, published, failed, abandoned, latency_ms_sum, latency_histogram)
	 SELECT 'topic' || t, b, 30000, 3, 0, 30000 * 4.2,
			ARRAY(SELECT CASE WHEN i BETWEEN 5 AND 20 THEN 1875 ELSE 0 END FROM generate_series(0, 127) i)
	   FROM generate_series(0, $TOPICS - 1) t,
			generate_series(date_bin('10 seconds', now(), 'epoch') - interval '2 hours',
							date_bin('10 seconds', now(), 'epoch'), interval '10 seconds') b
	 UNION ALL
	 SELECT 'topic' || t, '-infinity', 1e9, 100, 10, 4.2e9,
			ARRAY(SELECT CASE WHEN i BETWEEN 5 AND 20 THEN 62500000 ELSE 0 END FROM generate_series(0, 127) i)
	   FROM generate_series(0, $TOPICS - 1) t"

# enqueue FROM TO: events FROM..TO over the topics, in two sessions at once
enqueue() {
	local half=$(( ($1 + $2) / 2 ))
	sql "SELECT count(outbox_enqueue('topic' || (i % $TOPICS), jsonb_build_object('n', i), key => (i % 1000)::text))
		   FROM generate_series($1, $half) i" >/dev/null &
	sql "SELECT count(outbox_enqueue('topic' || (i % $TOPICS), jsonb_build_object('n', i), key => (i % 1000)::text))
		   FROM generate_series($half + 1, $2) i" >/dev/null
	wait $!
	sql "CHECKPOINT"
}

# the queries of the queries file, one file each
awk -v dir="$WORK" '
	/^[a-z_]+:$/ { name = substr($0, 1, length($0) - 1); next }
	/^  query: \|$/ { file = dir "/query_" name ".sql"; inq = 1; next }
	/^  [a-z]/ { inq = 0 }
	inq { sub(/^    /, ""); print > file }
' "$QUERIES"

# query_ms QUERY_FILE: the median time, in ms, of RUNS runs of the query in
# the file as the monitoring role, after one run to warm up
query_ms() {
	local args=(-c '\timing on')
	for _ in $(seq 0 "$RUNS"); do args+=(-f "$1"); done
	psql -X -q -d bench -U prometheus -o /dev/null "${args[@]}" |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -n +2 | median | xargs printf '%.2f'
}

echo "SELECT * FROM outbox_stats" > "$WORK/query_outbox_stats_view.sql"

# the exporter's own duration of a scrape of only these queries, median of
# RUNS scrapes; "-" without the exporter
exporter_scrape() {
	local port=$((PORT + 1)) d
	if [ ! -x "$EXPORTER" ]; then
		echo "-"
		return
	fi
	DATA_SOURCE_NAME="host=$WORK port=$PORT dbname=bench user=prometheus sslmode=disable" \
		"$EXPORTER" --extend.query-path="$QUERIES" --web.listen-address="127.0.0.1:$port" \
		--disable-default-metrics --disable-settings-metrics --no-collector.database \
		--no-collector.bgwriter >"$WORK/exporter.log" 2>&1 &
	EXPORTER_PID=$!
	for _ in $(seq 1 100); do
		curl -sf "http://127.0.0.1:$port/metrics" >/dev/null && break
		sleep 0.2
	done
	for _ in $(seq 1 "$RUNS"); do
		d=$(curl -sf "http://127.0.0.1:$port/metrics" |
			sed -n 's/^pg_exporter_last_scrape_duration_seconds \(.*\)/\1/p')
		awk -v d="$d" 'BEGIN { printf "%.2f\n", 1000 * d }'
	done | median | xargs printf '%.2f'
	kill "$EXPORTER_PID"
	wait "$EXPORTER_PID" 2>/dev/null || true
	EXPORTER_PID=
}

# measure LABEL: every query's median, their sum (one scrape's queries),
# the view's, and the exporter's scrape, into the arrays below
declare -A scrape unread view exporter
measure() {
	local total=0 q ms
	for q in "$WORK"/query_outbox*.sql; do
		[ "$q" = "$WORK/query_outbox_stats_view.sql" ] && continue
		ms=$(query_ms "$q")
		log "  $(basename "$q" .sql): $ms ms"
		total=$(awk -v a="$total" -v b="$ms" 'BEGIN { printf "%.2f", a + b }')
		[ "$q" = "$WORK/query_outbox_unread.sql" ] && unread[$1]=$ms
	done
	scrape[$1]=$total
	view[$1]=$(query_ms "$WORK/query_outbox_stats_view.sql")
	exporter[$1]=$(exporter_scrape)
	log "  $1: queries $total ms, outbox_stats ${view[$1]} ms, exporter's scrape ${exporter[$1]} ms"
}

log "$SMALL_N unread events"
enqueue 1 $SMALL_N
measure small

log "$UNREAD_N unread events"
enqueue $((SMALL_N + 1)) $UNREAD_N
sql "SELECT 'unread counted: ' || sum(unread) FROM outbox_unread_topics()" >&2
measure large

# what a claim leaves in the reader row under 100 concurrent writers: ended
# transactions that were running when it read the log (made up here: the
# worker is off)
log "$UNREAD_N unread events and 100 transactions in the reader's running list"
sql "UPDATE outbox_reader
		SET running = (SELECT array_agg(x::text::xid8) FROM generate_series(1000, 1099) x)"
measure running
sql "UPDATE outbox_reader SET running = '{}'"

log "$UNREAD_N unread events and a transaction of 1,000,000 events in progress"
psql -X -q -d bench -c "BEGIN" \
	-c "SELECT count(outbox_enqueue('bulk', jsonb_build_object('n', i))) FROM generate_series(1, 1000000) i" \
	-c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
BULK_PID=$!
until [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(3600)%'")" = 1 ]; do
	sleep 0.5
done
measure bulk
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(3600)%'" >/dev/null
wait $BULK_PID || true

result_header
row() {	# name label-ours label-baseline array [target]
	local -n a=$4
	result "$1" "${a[$2]}" "${a[$3]}" "$(ratio "${a[$2]}" "${a[$3]}")" "${5:-<= 1.5}"
}
row "scrape queries (ms), 10M unread vs 1k" large small scrape
# (10,000 events counted against 1,000: a row that explains the others)
row "  of which unread events (ms)" large small unread -
row "SELECT * FROM outbox_stats (ms), 10M vs 1k" large small view
row "scrape queries (ms), + 1M in progress, vs 1k" bulk small scrape
row "  of which unread events (ms)" bulk small unread -
row "scrape queries (ms), + 100 running xids, vs 1k" running small scrape
if [ "${exporter[small]}" != "-" ]; then
	row "exporter's scrape (ms), 10M unread vs 1k" large small exporter
fi
echo
cat "$RESULTS"
