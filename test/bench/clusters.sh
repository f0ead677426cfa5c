#!/bin/bash
#
# Several Kafka clusters: the latency of one cluster's topics while another
# cluster is down, or hangs, beside the same load with both up.  Two test
# brokers:
# topic up.t on the first (outbox.brokers), down.t on the second
# (outbox_set_topic).  Each phase runs pgbench at a fixed rate of
# transactions that enqueue one event to each topic, and takes the latency
# of up.t's events, from the commit of the enqueuing transaction (its
# commit timestamp) to the recording of the delivery report:
#
#   both up    the baseline
#   one down   the second broker down for the whole phase
#   one hung   the second broker answering nothing for the whole phase,
#              its connections open (a latency of a minute)
#
# Targets: up.t's p99 under 50 ms with the other cluster down, its max
# under 1 s with the other one hung.  After each, the second broker comes
# back, and every down.t event must be published.
#
# Usage: test/bench/clusters.sh [PHASE_S [RATE]]	(20 s at 200 tx/s)

PORT=54346
. "$(dirname "$0")/common.sh" "$@"
PHASE_S=${1:-20}
RATE=${2:-200}

# two brokers: the first's control input on fd 4, the second's on fd 3
mkdir "$WORK/a" "$WORK/b"
start_broker "$WORK/a"
exec 4>&3
FIRST=$BROKERS
start_broker "$WORK/b"
SECOND=$BROKERS
BROKERS=$FIRST
start_server "$WORK/data" bench "track_commit_timestamp = on" "outbox.poll_interval = '100ms'"
createdb bench
sql "CREATE EXTENSION outbox"
sql "SELECT outbox_set_topic('down.*', '$SECOND')"
sql "CREATE TABLE bench_latency (id bigint PRIMARY KEY, ms float8)"
cat > "$WORK/two.sql" <<'SQL'
\set k random(1, 100)
BEGIN;
SELECT outbox_enqueue('up.t', '{"n": 1}'::jsonb, key => :k::text);
SELECT outbox_enqueue('down.t', '{"n": 1}'::jsonb, key => :k::text);
END;
SQL

# phase NAME: the load for PHASE_S seconds, then up.t's latencies
phase() {
	local from
	from=$(sql "SELECT coalesce(max(id), 0) FROM outbox_log")
	sql "TRUNCATE bench_latency"
	pgbench -n -M prepared --rate "$RATE" -T "$PHASE_S" -c 2 -j 2 -f "$WORK/two.sql" bench \
		>"$WORK/pgbench.out" 2>&1
	until [ "$(sql "SELECT pending + failed = 0 FROM outbox_stats WHERE topic = 'up.t'")" = t ]; do
		sleep 0.2
	done
	copy_latencies "l.topic = 'up.t' AND l.id > $from"
	read -r p50 p99 max count <<<"$(latencies)"
	printf '%-28s %8s %8s %8s %8s\n' "$1" "$p50" "$p99" "$max" "$count"
	sql "SELECT 'over 50 ms: ' || count(*) FILTER (WHERE ms > 50) || ' events, committed in '
				|| coalesce(string_agg(DISTINCT to_char(pg_xact_commit_timestamp(l.txid::xid), 'HH24:MI:SS'), ' '), '-')
		   FROM bench_latency b JOIN outbox_log l USING (id) WHERE b.ms > 50" >&2
}

# back NAME: the second broker is back; wait until every event is published
back() {
	local held start
	held=$(sql "SELECT pending + failed FROM outbox_stats WHERE topic = 'down.t'")
	start=$(now)
	wait_drained
	log "the other cluster $1 held $held events; all published $(awk -v s="$start" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }') s after it came back"
}

until [ "$(sql "SELECT state FROM outbox_worker_status() WHERE database = 'bench'")" = idle ]; do
	sleep 0.2
done
log "$RATE transactions/s of one event to each cluster, ${PHASE_S}s a phase"
printf '%-28s %8s %8s %8s %8s\n' "up.t, commit to delivery" "p50 ms" "p99 ms" "max ms" "events"
phase "both clusters up"
echo "down 1" >&3
phase "the other cluster down"
echo "up 1" >&3
back down
echo "rtt 1 60000" >&3
phase "the other cluster hung"
echo "rtt 1 0" >&3
back hung
read -r enqueued published <<<"$(sql "SELECT count(*), count(*) FILTER (WHERE status = 'published')
										 FROM outbox_messages WHERE topic = 'down.t'" | tr '|' ' ')"
log "down.t: $enqueued enqueued, $published published"
[ "$enqueued" = "$published" ]
