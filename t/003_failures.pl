
# Refused deliveries: a retriable error backs off as configured and is
# retried; a permanent one abandons at once; max_attempts abandons; a
# failed event holds back the later events of its key.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker) = outbox_node_with_broker(
	'failures',
	'outbox.delivery_timeout' => '500ms',
	'outbox.retry_base_delay' => '2s',
	'outbox.retry_max_delay' => '1min',
	'outbox.retry_jitter' => '0',
	'outbox.max_attempts' => '10',
	'outbox.poll_interval' => '100ms',
	# the retry delays are read from the commit that recorded the failure
	'track_commit_timestamp' => 'on');

sub row
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT status, attempts, coalesce(last_error, '') FROM outbox_messages WHERE id = $id"
	);
}

sub enqueue
{
	my ($topic, $payload, $key) = @_;
	$key = defined $key ? "'$key'" : 'NULL';
	return $node->safe_psql('postgres',
		"SELECT outbox_enqueue('$topic', '$payload'::text, key => $key)");
}

# --- a retriable error: failed, attempts + 1, error text, delays doubling
$broker->command("topic_error retry.t $LEADER_NOT_AVAILABLE");
my $id = enqueue('retry.t', 'r1', 'k');
my @delays;
for my $attempt (1, 2)
{
	ok( wait_for_sql(
			$node,
			"SELECT attempts = $attempt AND status = 'failed' FROM outbox_messages WHERE id = $id",
			30),
		"attempt $attempt fails");
	push @delays,
	  $node->safe_psql('postgres',
		"SELECT extract(epoch FROM next_attempt_at - pg_xact_commit_timestamp(xmin)) FROM outbox_retries WHERE id = $id"
	  );
}
is(row($id), 'failed|2|Local: Message timed out', 'status, attempts and librdkafka\'s error text');
ok($delays[0] > 1.5 && $delays[0] <= 2.0, "first retry after retry_base_delay (${\ $delays[0]}s)");
ok($delays[1] > 3.5 && $delays[1] <= 4.0, "second retry after twice that (${\ $delays[1]}s)");

$broker->command("topic_error retry.t 0");
ok(wait_for_status($node, $id, 'published', 30),
	'published once the error clears');
is(row($id), 'published|3|Local: Message timed out', 'on the third attempt, last error kept');
is(scalar @{ kafka_read($broker, 'retry.t') }, 1, 'and it arrived');

# --- an authorization error is an operator's to mend: retried with
# backoff, attempts counted, and the key held back meanwhile
$broker->command("produce_errors 1 $TOPIC_AUTHORIZATION_FAILED");
$id = enqueue('acl.t', 'a1', 'k');
ok(wait_for_status($node, $id, 'failed', 30),
	'an authorization error fails the attempt, it does not abandon');
is(row($id), 'failed|1|Broker: Topic authorization failed',
	'after one attempt, with the broker\'s error');
my $next = enqueue('acl.t', 'a2', 'k');
ok(all_published($node, 'acl.t', 30),
	'the retry is published, then the next event of its key');
is_deeply([ map { $_->{payload} } @{ kafka_read($broker, 'acl.t') } ],
	[ 'a1', 'a2' ], 'in their order');

# --- an error about the event itself abandons at once, with the broker's text
$broker->command("produce_errors 1 $MESSAGE_TOO_LARGE");
$id = enqueue('perm.t', 'p1', 'k');
ok(wait_for_status($node, $id, 'abandoned', 30),
	'a permanent error abandons the event');
is(row($id), 'abandoned|1|Broker: Message size too large',
	'after one attempt, with the broker\'s error');

# the abandoned event no longer holds its key back, and the topic works
$id = enqueue('perm.t', 'p2', 'k');
ok(wait_for_status($node, $id, 'published', 30),
	'the next event of the key is published');
is_deeply([ map { $_->{payload} } @{ kafka_read($broker, 'perm.t') } ],
	['p2'], 'only it arrived');

# --- max_attempts: the last attempt abandons
reconfigure($node, 'SET outbox.max_attempts = 3', "SET outbox.retry_base_delay = '100ms'");
$broker->command("topic_error max.t $LEADER_NOT_AVAILABLE");
$id = enqueue('max.t', 'm1', 'k');
ok(wait_for_status($node, $id, 'abandoned', 60),
	'abandoned after max_attempts');
is(row($id), 'abandoned|3|Local: Message timed out', 'after exactly 3 attempts');
is($node->safe_psql('postgres', "SELECT next_attempt_at IS NULL FROM outbox_messages WHERE id = $id"),
	't', 'with no next attempt');

# --- a failed event holds back later events of its key, not other keys
reconfigure($node, 'SET outbox.max_attempts = 10', "SET outbox.retry_base_delay = '5s'");
$broker->command("topic_error hold.t $LEADER_NOT_AVAILABLE");
my $first = enqueue('hold.t', 'first', 'K');
ok(wait_for_status($node, $first, 'failed', 30),
	'the first event of key K failed');
my $second = enqueue('hold.t', 'second', 'K');
my $other = enqueue('hold.t', 'other', 'L');
ok( wait_for_sql($node,
		"SELECT attempts > 0 FROM outbox_messages WHERE id = $other", 30),
	'an event of another key is tried meanwhile');
is( $node->safe_psql('postgres',
		"SELECT status || ' ' || attempts FROM outbox_messages WHERE id IN ($first, $second) ORDER BY id"),
	"failed 1\npending 0",
	'the later event of key K is not tried while the first waits for its retry');
$broker->command("topic_error hold.t 0");
ok(all_published($node, 'hold.t', 60),
	'all are published once the topic is healthy');
my @k = map { $_->{payload} } grep { $_->{key} eq 'K' } @{ kafka_read($broker, 'hold.t') };
is_deeply(\@k, [ 'first', 'second' ], 'key K in its order');

$node->stop;
$broker->stop;
done_testing();
