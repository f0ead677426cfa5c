# A cluster that hangs (it answered, then answers nothing with its
# connections open), one that is a black hole from the start (connections
# accepted, nothing answered), one that refuses connections, one that
# never answers then refuses: each holds back its own topics only.  The
# default cluster's events are published within a second of their commit,
# the first one after the producers closed for idleness included; the
# faulty cluster's events are charged an attempt only when their own
# delivery times out (a cluster seen down, or never seen up, charges
# none); and once it answers, every one of them is published, none lost,
# in order within its key, and none that rolled back.  A cluster that is
# merely far away (slow answers) is waited for, not handed off.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $main) = outbox_node_with_broker(
	'hung',
	'outbox.poll_interval' => '100ms',
	'outbox.delivery_timeout' => '3s',
	# one charge per timeout, and none again within a phase's checks
	'outbox.retry_base_delay' => '20s',
	'outbox.retry_jitter' => '0');

# Enqueue events $from..$to of $topic, {"n": i}, one transaction, keyed
# $prefix || i % 3.
sub enqueue
{
	my ($topic, $from, $to, $prefix) = @_;
	enqueue_events($node, $topic, $from, $to, keys => 3, prefix => $prefix);
	return;
}

# An event of $topic enqueued in a transaction that rolls back.
sub rolled_back
{
	my ($topic) = @_;
	$node->safe_psql('postgres',
		"BEGIN; SELECT outbox_enqueue('$topic', '{\"n\": 999}'::jsonb, key => '0'); ROLLBACK;");
	return;
}

# Seconds from the commit of a new event of the default cluster's topic
# to its publication (published_at: its delivery report, recorded).
my $orders = 0;

sub latency
{
	$orders++;
	my ($id, $committed) = split /\n/,
	  $node->safe_psql('postgres',
		"SELECT outbox_enqueue('orders', '{\"n\": $orders}'::jsonb, key => 'k'); SELECT clock_timestamp()"
	  );
	wait_for_status($node, $id, 'published', 90) or return 999;
	return $node->safe_psql('postgres',
		"SELECT round(extract(epoch FROM published_at - '$committed')::numeric, 3) FROM outbox_messages WHERE id = $id"
	);
}

# The worst of $n such latencies, a tenth of a second apart.
sub worst_latency
{
	my ($n) = @_;
	my $worst = 0;
	for (1 .. $n)
	{
		my $l = latency();
		$worst = $l if $l > $worst;
		select(undef, undef, undef, 0.1);
	}
	return $worst;
}

# Wait until the producers have closed for idleness.
sub producers_closed
{
	return wait_for_sql($node,
		"SELECT state = 'closed' FROM outbox_cluster_status() WHERE brokers = '$main->{bootstrap}'",
		120);
}

# The most attempts an unpublished event of $topic has had.
sub attempts
{
	my ($topic) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(attempts), 0) FROM outbox_messages WHERE topic = '$topic' AND status <> 'published'"
	);
}

# Once $broker answers for $topic: all $count events published, none
# lost, in key order, none that rolled back.
sub all_delivered
{
	my ($name, $broker, $topic, $count) = @_;
	ok( wait_for_sql(
			$node,
			"SELECT count(*) = $count AND bool_and(status = 'published') FROM outbox_messages WHERE topic = '$topic'",
			120),
		"$name: once it answers, every one of its events is published");
	my $records = kafka_read($broker, $topic);
	is(distinct_events($records), $count, "$name: none lost");
	ok(keys_in_order(records_by_key($records)), "$name: in order within each key");
	is(scalar(grep { $_->{payload} =~ /"n": 999\b/ } @$records),
		0, "$name: none of a transaction that rolled back");
	return;
}

# A cluster starts listening at $port, forwarding to a broker: then as
# all_delivered.
sub delivered_once_listening
{
	my ($name, $port, $topic, $count) = @_;
	my $broker = start_broker(1);
	start_black_hole($port, $broker->{bootstrap});
	all_delivered($name, $broker, $topic, $count);
	return;
}

# --- hung: it answered, then its broker holds every answer back a minute
my $hung = start_broker(1);
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('hung.*', '$hung->{bootstrap}')");
enqueue('hung.t', 1, 3);
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 3 AND bool_and(status = 'published') FROM outbox_messages WHERE topic = 'hung.t'"
	),
	'hung: its events are published while it answers');
$hung->command('rtt 1 60000');
enqueue('hung.t', 4, 9);
rolled_back('hung.t');
my $first = latency();
ok($first < 1, "hung: an event of the default cluster is published ${first}s after its commit");
is(attempts('hung.t'), 0, 'hung: its events spent no attempt while they wait');
# an operator gives one of them up meanwhile
my $abandoned = $node->safe_psql('postgres',
	"SELECT min(id) FROM outbox_messages WHERE topic = 'hung.t' AND status <> 'published'");
$node->safe_psql('postgres', "SELECT outbox_abandon($abandoned)");
my $worst = worst_latency(5);
ok($worst < 1, "hung: and so are the next ones (at worst ${worst}s)");
ok( wait_for_sql(
		$node,
		"SELECT bool_and(attempts > 0) FROM outbox_messages WHERE topic = 'hung.t' AND status NOT IN ('published', 'abandoned')",
		30),
	'hung: its events are charged once their delivery times out');
is(attempts('hung.t'), 1, 'hung: one attempt each for one timeout');
is( $node->safe_psql(
		'postgres', "SELECT status || ' ' || attempts FROM outbox_messages WHERE id = $abandoned"),
	'abandoned 0',
	'hung: the late report leaves the event the operator abandoned as it was');
ok(producers_closed(), 'hung: the producers close for idleness');
enqueue('hung.t', 10, 12, 'after');
$first = latency();
ok($first < 1,
	"hung: the first event after idleness is published ${first}s after its commit");
$node->safe_psql('postgres', "SELECT outbox_retry($abandoned)");
$hung->command('rtt 1 0');
all_delivered('hung', $hung, 'hung.t', 12);

# --- a black hole: connections accepted, nothing ever answered
my $hole = start_black_hole();
my $behind_hole = start_broker(1);
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('hole.*', '$hole->{bootstrap}')");
ok(producers_closed(), 'black hole: the producers close for idleness');
enqueue('hole.t', 1, 6);
rolled_back('hole.t');
$first = latency();
ok($first < 1,
	"black hole: the first event after idleness is published ${first}s after its commit");
is(attempts('hole.t'), 0, 'black hole: its events spent no attempt while they wait');
$worst = worst_latency(5);
ok($worst < 1, "black hole: and so are the next ones (at worst ${worst}s)");
# the worker stops while they wait: what their reports would have said is
# lost, and they are sent again when their hand-off said
my $pid = $node->safe_psql('postgres', 'SELECT pid FROM outbox_worker_status()');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( wait_for_sql(
		$node,
		"SELECT pid NOT IN (0, $pid) AND state = 'idle' FROM outbox_worker_status()"),
	'black hole: the worker is started again');
ok( wait_for_sql(
		$node,
		"SELECT bool_and(attempts > 0) FROM outbox_messages WHERE topic = 'hole.t'",
		30),
	'black hole: its events are charged once their delivery times out');
is(attempts('hole.t'), 1, 'black hole: one attempt each for one timeout');
$hole->command("forward $behind_hole->{bootstrap}");
all_delivered('black hole', $behind_hole, 'hole.t', 6);

# --- refused: nothing listens at its address, until a broker does
my $port = PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('refused.*', '127.0.0.1:$port')");
ok(producers_closed(), 'refused: the producers close for idleness');
enqueue('refused.t', 1, 6);
rolled_back('refused.t');
$first = latency();
ok($first < 1,
	"refused: the first event after idleness is published ${first}s after its commit");
$worst = worst_latency(5);
ok($worst < 1, "refused: and so are the next ones (at worst ${worst}s)");
sleep 4;
is(attempts('refused.t'), 0,
	'refused: its events spend no attempt past their delivery timeout: the cluster is down');
delivered_once_listening('refused', $port, 'refused.t', 6);

# --- gone: a cluster that never answered, its events handed off while the
# default cluster's wait, then refusing connections before their delivery
# times out: it was down all along, and they spend no attempt
my $gone = start_black_hole();
my ($gone_port) = $gone->{bootstrap} =~ /:(\d+)$/;
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('gone.*', '$gone->{bootstrap}')");
enqueue('gone.t', 1, 6);
rolled_back('gone.t');
$first = latency();
ok($first < 1,
	"gone: an event of the default cluster is published ${first}s after its commit");
$gone->stop;
sleep 4;
is(attempts('gone.t'), 0,
	'gone: its events handed off spend no attempt: it never answered, then refused');
delivered_once_listening('gone', $gone_port, 'gone.t', 6);

# --- far away: a cluster that answers in 450 ms is slow, not hung: once
# its answers have been timed, its batches are waited for, not handed off
my $far = start_broker(1);
$far->command('rtt 1 450');
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('far.*', '$far->{bootstrap}')");
my $published = 0;
for my $round (0 .. 5)
{
	enqueue('far.t', 5 * $round + 1, 5 * $round + 5);
	$published++
	  if wait_for_sql(
		$node,
		"SELECT count(*) = 5 * ($round + 1) AND bool_and(status = 'published') FROM outbox_messages WHERE topic = 'far.t'",
		60);
}
is($published, 6, 'far: each of its transactions is published');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM outbox_retries WHERE topic = 'far.t' AND (convert_from(payload, 'UTF8')::jsonb->>'n')::int > 5"
	),
	'0',
	'far: once its answers were timed, none of its events was handed off');

$node->stop;
done_testing();
