
# A record's Kafka timestamp is its event's created_at (CreateTime, in
# milliseconds), not the time the worker published it: an event enqueued
# 1.5 s before its transaction commits carries the earlier time, and a
# retried event keeps the time of its first try.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) = outbox_node_with_broker(
	'timestamps',
	'outbox.poll_interval' => '100ms',
	'outbox.delivery_timeout' => '500ms',
	'outbox.retry_base_delay' => '1s',
	'outbox.retry_jitter' => '0');

# created_at in milliseconds since the Unix epoch, as Kafka counts, and
# published_at, per event_id
sub times_of
{
	my ($topic) = @_;
	my %times;
	for my $row (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SELECT event_id, floor(extract(epoch FROM created_at) * 1000)::bigint, "
			  . "floor(extract(epoch FROM published_at) * 1000)::bigint "
			  . "FROM outbox_messages WHERE topic = '$topic'"))
	{
		my ($event_id, $created, $published) = split /\|/, $row;
		$times{$event_id} = { created => $created, published => $published };
	}
	return \%times;
}

# --- a transaction that commits 1.5 s after it enqueued
$node->safe_psql('postgres',
	"BEGIN; SELECT outbox_enqueue('ts.t', 'e' || i, key => 'k') FROM generate_series(1, 3) i; SELECT pg_sleep(1.5); COMMIT"
);
ok( wait_for_sql($node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'ts.t'"),
	'the events are published');
my $times = times_of('ts.t');
my $records = kafka_read($broker, 'ts.t');
is(scalar @$records, 3, 'three records arrived');
is( scalar(grep { $_->{timestamp} == $times->{ $_->{headers}{event_id} }{created} } @$records),
	3, 'each record\'s timestamp is its event\'s created_at, to the millisecond');
is( scalar(
		grep { $times->{ $_->{headers}{event_id} }{published} - $_->{timestamp} >= 1500 } @$records),
	3, 'not the time it was published, 1.5 s or more later');

# --- a retried event keeps its created_at
$broker->command("topic_error retried.t $LEADER_NOT_AVAILABLE");
$node->safe_psql('postgres', "SELECT outbox_enqueue('retried.t', 'r'::text)");
ok( wait_for_sql($node,
		"SELECT status = 'failed' FROM outbox_messages WHERE topic = 'retried.t'"),
	'the first attempt fails');
$broker->command("topic_error retried.t 0");
ok( wait_for_sql($node,
		"SELECT status = 'published' FROM outbox_messages WHERE topic = 'retried.t'"),
	'the retry is published');
$times = times_of('retried.t');
$records = kafka_read($broker, 'retried.t');
is( $records->[0]{timestamp},
	$times->{ $records->[0]{headers}{event_id} }{created},
	'with the timestamp of its creation, not of the retry');

$node->stop;
$broker->stop;
done_testing();
