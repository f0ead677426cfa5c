
# Topics: one that the cluster refuses does not hold up the rest of its
# batch: its events fail at once (an attempt, a backoff, later events of
# their key held back) while the other topics' events are published; and
# topics met for the first time do not slow down the ones already known:
# the known topics' events are produced first, and the new topics are
# looked up together, not one round trip after another.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# outbox.delivery_timeout stays at its 30 s: what a refused topic held
# its batch for
my ($node, $broker) = outbox_node_with_broker(
	'topics',
	'outbox.poll_interval' => '100ms',
	'outbox.retry_base_delay' => '2s',
	'outbox.retry_jitter' => '0',
	# the retry's delay is read from the commit that recorded the failure
	'track_commit_timestamp' => 'on');

sub row
{
	my ($payload) = @_;
	return $node->safe_psql('postgres',
		"SELECT status || '|' || attempts || '|' || coalesce(last_error, '') FROM outbox_messages WHERE convert_from(payload, 'UTF8') = '$payload'"
	);
}

# Is each key's sequence of "<letter><number>" payloads in order?
sub in_order
{
	my ($records) = @_;
	my %last;
	for my $r (@$records)
	{
		my ($n) = $r->{payload} =~ /(\d+)$/;
		my $key = $r->{key} // '';
		return 0 if defined $last{$key} && $last{$key} >= $n;
		$last{$key} = $n;
	}
	return 1;
}

# --- a topic the cluster refuses, in a batch with 200 events of others
$broker->command("topic_error denied.t $TOPIC_AUTHORIZATION_FAILED");
my $start = time;
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_enqueue('denied.t', 'd1'::text, key => 'K');
	SELECT outbox_enqueue('fine.' || (i % 5), 'f' || i, key => (i % 13)::text)
	  FROM generate_series(1, 200) i;
	SELECT outbox_enqueue('denied.t', 'd2'::text, key => 'K');
	COMMIT;
});
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 200 FROM outbox_messages WHERE topic LIKE 'fine.%' AND status = 'published'",
		10),
	'the other topics\' 200 events are published without waiting for the refused one');
my $elapsed = time - $start;
diag(sprintf('200 events behind a refused topic published in %.2f s', $elapsed));
is(row('d1'), 'failed|1|Broker: Topic authorization failed',
	'the refused topic\'s event failed: one attempt, the cluster\'s error');
ok( $node->safe_psql('postgres',
		"SELECT next_attempt_at > pg_xact_commit_timestamp(xmin) + interval '1 second' FROM outbox_retries WHERE convert_from(payload, 'UTF8') = 'd1'"
	) eq 't',
	'and waits for its retry');
is(row('d2'), 'pending|0|', 'the later event of its key waits behind it, untouched');
my @fine = map { kafka_read($broker, "fine.$_") } 0 .. 4;
is(scalar(map { @$_ } @fine), 200, 'all 200 arrived');
is(scalar(grep { !in_order($_) } @fine), 0, 'each key in its order');

# while the topic is refused, other events keep going and its retry fails
# at once again
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('fine.0', 'g' || i, key => 'G') FROM generate_series(1, 10) i");
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 10 FROM outbox_messages WHERE convert_from(payload, 'UTF8') LIKE 'g%' AND status = 'published'",
		10),
	'new events of other topics are published meanwhile');
ok( wait_for_sql($node,
		"SELECT attempts = 2 FROM outbox_messages WHERE convert_from(payload, 'UTF8') = 'd1'", 10),
	'the retry is refused again');
is(row('d2'), 'pending|0|', 'the later event still waits');
is( $node->safe_psql('postgres',
		"SELECT state <> 'broker unreachable' AND last_error = 'topic \"denied.t\": Broker: Topic authorization failed' FROM outbox_worker_status()"
	),
	't',
	'the worker\'s status names the refused topic and the cluster\'s error');
is( $node->safe_psql('postgres',
		"SELECT status || '|' || detail FROM outbox_health WHERE signal = 'failing topics'"),
	'critical|topic denied.t: 1 events failing: Broker: Topic authorization failed',
	'outbox_health: the failing topic is critical, with the error');

$broker->command("topic_error denied.t 0");
ok( wait_for_sql(
		$node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'denied.t'",
		30),
	'once the topic is allowed, its events are published');
ok(wait_for_sql($node, "SELECT last_error IS NULL FROM outbox_worker_status()"),
	'the status no longer names it');
is( $node->safe_psql('postgres',
		"SELECT string_agg(signal || ':' || status, ' ') FROM outbox_health WHERE status <> 'ok'"),
	'', 'and outbox_health is ok throughout');
is_deeply([ map { $_->{payload} } @{ kafka_read($broker, 'denied.t') } ],
	[ 'd1', 'd2' ], 'in their order, once each');

# --- 500 new topics in the batch of 100 events of a known topic, at 20 ms
# of broker latency
$node->safe_psql('postgres', "SELECT outbox_enqueue('known.t', 'k0'::text)");
ok( wait_for_sql($node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'known.t'"),
	'the known topic is published to once');
$broker->command('rtt 1 20');
$start = time;
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_enqueue('new.' || i, 'n' || i, key => 'N') FROM generate_series(1, 500) i;
	SELECT outbox_enqueue('known.t', 'k' || i, key => (i % 10)::text)
	  FROM generate_series(1, 100) i;
	COMMIT;
});
my $arrived;
while (time - $start < 60)
{
	if (@{ kafka_read($broker, 'known.t') } >= 101)
	{
		$arrived = time - $start;
		last;
	}
	usleep(20_000);
}
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 101 FROM outbox_messages WHERE topic = 'known.t' AND status = 'published'",
		60),
	'the known topic\'s events are published');
my $known_published = time - $start;
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 500 FROM outbox_messages WHERE topic LIKE 'new.%' AND status = 'published'",
		60),
	'the new topics\' events are published');
diag(
	sprintf(
		'known topic behind 500 new ones: in Kafka after %.2f s, published after %.2f s',
		$arrived // -1, $known_published));
# (a look-up per topic in turn would take 10 s)
ok(defined $arrived && $arrived < 5,
	'the known topic\'s events reach Kafka without waiting for the new topics to be looked up');
ok($known_published < 9,
	'the whole batch, 500 new topics included, is published in far less than a round trip per topic');
my @known = @{ kafka_read($broker, 'known.t') };
is(in_order([ grep { $_->{payload} ne 'k0' } @known ]), 1, 'each key of the known topic in its order');

$node->stop;
$broker->stop;
done_testing();
