# Several Kafka clusters: topics go to the cluster their pattern names, a
# producer each.  A cluster that is down holds back its own topics only:
# the others' events keep arriving, its own wait, and none is lost,
# charged an attempt or reordered when it is back.  A pattern moved to
# another cluster while its events are in flight keeps every key's order.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $main = start_broker(1);
my $other = start_broker(1);
my $node = outbox_node(
	'clusters', $main,
	'outbox.poll_interval' => '100ms',
	'outbox.batch_size' => '50');

sub enqueue
{
	my ($topic, $from, $to) = @_;
	$node->safe_psql('postgres',
		"SELECT outbox_enqueue('$topic', ('{\"n\": ' || i || '}')::jsonb, key => (i % 5)::text) FROM generate_series($from, $to) i"
	);
}

sub all_published
{
	my ($topic) = @_;
	return wait_for_sql($node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = '$topic'"
	);
}

# --- topics routed by pattern, a producer per cluster
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('billing.*', '$other->{bootstrap}')");
enqueue('orders', 1, 100);
enqueue('billing.invoices', 1, 100);
ok(all_published('orders') && all_published('billing.invoices'),
	'events of both clusters are published');
is(distinct_events(kafka_read($main, 'orders')), 100, 'orders on the main cluster');
is(distinct_events(kafka_read($other, 'billing.invoices')),
	100, 'billing.invoices on the cluster its pattern names');
is(scalar @{ kafka_read($main, 'billing.invoices') },
	0, 'and none on the main cluster');
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 2 AND bool_and(state = 'up') FROM outbox_cluster_status() WHERE database = current_database()"
	),
	'outbox_cluster_status() shows both clusters up');

# --- the other cluster down: the main one's topics go on, its own wait
$other->command('down -1');
enqueue('billing.invoices', 101, 300);
ok( wait_for_sql(
		$node,
		"SELECT state = 'unreachable' FROM outbox_cluster_status() WHERE brokers = '$other->{bootstrap}'"
	),
	'the cluster that is down shows as unreachable');
enqueue('orders', 101, 300);
ok(all_published('orders'),
	'the main cluster\'s events are published while the other is down');
is(distinct_events(kafka_read($main, 'orders')), 300, 'every one of them arrived');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) > 0 FROM outbox_messages WHERE topic = 'billing.invoices' AND status = 'pending'"
	),
	't',
	'the down cluster\'s events wait as pending');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM outbox_messages WHERE status IN ('failed', 'abandoned') OR (status = 'pending' AND attempts > 0)"
	),
	'0',
	'no event failed, was abandoned or spent an attempt');
is( $node->safe_psql(
		'postgres',
		"SELECT state FROM outbox_worker_status() WHERE database = current_database()"
	),
	'idle',
	'the worker goes on, idle once the main cluster\'s events are out');
is( $node->safe_psql(
		'postgres', "SELECT status, detail FROM outbox_health WHERE signal = 'brokers'"),
	"critical|no broker of cluster $other->{bootstrap} answers: its topics wait",
	'outbox_health says which cluster is down');

$other->command('up -1');
ok(all_published('billing.invoices'), 'once it is back its events are published');
is($node->safe_psql('postgres', "SELECT status FROM outbox_health WHERE signal = 'brokers'"),
	'ok', 'and outbox_health is well again');
my $billing = kafka_read($other, 'billing.invoices');
is(distinct_events($billing), 300, 'none lost');
ok(keys_in_order(records_by_key($billing)), 'none reordered within its key');
ok($node->log_contains('Kafka brokers reachable again'), 'the resumption is logged');

# --- a pattern moved to the main cluster while its events are in flight:
# what the other cluster took is finished there first
$other->command('rtt 1 200');
enqueue('billing.moved', 1, 1000);
ok( wait_for_sql(
		$node,
		"SELECT count(*) >= 100 FROM outbox_messages WHERE topic = 'billing.moved' AND status = 'published'"
	),
	'the other cluster publishes the first events');
$node->safe_psql('postgres', "SELECT outbox_reset_topic('billing.*')");
ok(all_published('billing.moved'), 'every event is published after the move');
my $old = records_by_key(kafka_read($other, 'billing.moved'));
my $new = records_by_key(kafka_read($main, 'billing.moved'));
is( distinct_events(kafka_read($other, 'billing.moved')) +
	  distinct_events(kafka_read($main, 'billing.moved')),
	1000,
	'every event arrived at one cluster or the other');
ok(scalar(keys %$new) > 0, 'the later ones at the main cluster');
ok(keys_in_order($old) && keys_in_order($new), 'in order within each cluster');
my $overtaken = 0;
for my $key (keys %$new)
{
	my ($max_old) = sort { $b <=> $a } @{ $old->{$key} // [] };
	my ($min_new) = sort { $a <=> $b } @{ $new->{$key} };
	$overtaken++ if defined $max_old && $min_new < $max_old;
}
is($overtaken, 0, 'no key\'s event at the main cluster precedes one left at the other');

# --- an extension's owner that is no superuser cannot choose where the
# credentials of the properties go, neither with outbox_set_topic() nor by
# writing the table, which the bootstrap superuser owns
$node->safe_psql('postgres',
	'CREATE ROLE app_owner LOGIN SUPERUSER; CREATE DATABASE app OWNER app_owner');
$node->safe_psql('app', 'SET ROLE app_owner; CREATE EXTENSION outbox');
$node->safe_psql('postgres', 'ALTER ROLE app_owner NOSUPERUSER');
for my $sql (
	"SELECT outbox_set_topic('payments', 'kafka-elsewhere:9092')",
	"INSERT INTO outbox_topic_settings (pattern, brokers) VALUES ('payments', 'kafka-elsewhere:9092')")
{
	my ($ret, $out, $err) = $node->psql('app', "SET ROLE app_owner; $sql");
	like($err, qr/permission denied/, "the owner is refused: $sql");
}
is($node->safe_psql('app', 'SET ROLE app_owner; SELECT count(*) FROM outbox_topic_settings'),
	'0', 'and reads the settings');

$node->stop;
$main->stop;
$other->stop;
done_testing();
