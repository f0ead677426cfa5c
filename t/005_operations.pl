
# Running it: captured row changes arriving in Kafka, retention removing
# rows while publishing goes on, the dead-letter topic, retry of abandoned
# events, and outbox_worker_status() through a broker outage.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my ($node, $broker) = outbox_node_with_broker(
	'operations',
	'outbox.published_retention' => '2s',
	'outbox.dead_letter_topic' => 'dead.letters',
	'outbox.poll_interval' => '100ms');

sub status
{
	return $node->safe_psql('postgres',
		"SELECT state || ' ' || coalesce(brokers_up, -1) FROM outbox_worker_status()");
}

# --- outbox_worker_status(): idle and connected
ok(wait_for_sql($node, "SELECT state = 'idle' AND brokers_up = 1 FROM outbox_worker_status()"),
	'the worker is idle, with one broker up');
is( $node->safe_psql('postgres',
		"SELECT pid = (SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox worker') FROM outbox_worker_status()"),
	't',
	'its pid is the worker\'s');

# --- outbox_attach: every change of a table arrives in Kafka
$node->safe_psql(
	'postgres', q{
	CREATE TABLE orders (id int PRIMARY KEY, status text);
	SELECT outbox_attach('orders', 'orders.changes');
	INSERT INTO orders VALUES (1, 'new'), (2, 'new');
	UPDATE orders SET status = 'paid' WHERE id = 1;
	DELETE FROM orders WHERE id = 2;
	BEGIN;
	UPDATE orders SET status = 'rolled back' WHERE id = 1;
	ROLLBACK;
});
my $records = wait_for_records($broker, 'orders.changes', 4);
my %ops;
push @{ $ops{ $_->{key} } }, ($_->{payload} =~ /"op": "(\w)"/)[0] for @$records;
is_deeply(\%ops, { 1 => [ 'c', 'u' ], 2 => [ 'c', 'd' ] },
	'each change arrived, keyed by the primary key, in order per key');
my ($update) = grep { $_->{payload} =~ /"op": "u"/ } @$records;
like($update->{payload},
	qr/"before": \{"id":1,"status":"new"\}, "after": \{"id":1,"status":"paid"\}/,
	'an update carries both images');

# --- retention: published rows are removed while publishing goes on
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('kept', 'e'::text) FROM generate_series(1, 3000)");
ok( wait_for_sql(
		$node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE topic = 'kept'", 60),
	'published rows are deleted after outbox.published_retention');
is(scalar @{ kafka_read($broker, 'kept') }, 3000, 'after every event was delivered');

$node->safe_psql('postgres',
	"ALTER SYSTEM SET outbox.published_retention = 0; SELECT pg_reload_conf()");
sleep 1;
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('deleted', 'e'::text) FROM generate_series(1, 500)");
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE topic = 'deleted'"),
	'with outbox.published_retention = 0 rows go on delivery');
is(scalar @{ wait_for_records($broker, 'deleted', 500) }, 500, 'and every event was delivered');
ok( wait_for_sql($node,
		"SELECT published_last_hour = 500 FROM outbox_stats WHERE topic = 'deleted'"),
	'outbox_stats still counts them');

# --- a permanently refused event is abandoned and sent to the dead-letter topic
$broker->command("produce_errors 1 $MESSAGE_TOO_LARGE");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('secret', '{\"n\": 1}'::jsonb, key => 'k1', headers => '{\"trace\": \"t1\"}')"
);
ok( wait_for_sql($node,
		"SELECT status = 'abandoned' FROM outbox_messages WHERE topic = 'secret'"),
	'the event is abandoned');
my $dead = wait_for_records($broker, 'dead.letters', 1);
is(scalar @$dead, 1, 'one record in the dead-letter topic');
is($dead->[0]{payload}, '{"n": 1}', 'with the original payload');
is($dead->[0]{key}, 'k1', 'the original key');
is_deeply(
	[ @{ $dead->[0]{headers} }{qw(original_topic attempts last_error trace)} ],
	[ 'secret', '1', 'Broker: Message size too large', 't1' ],
	'and headers naming its topic, attempts and error, beside its own');
is( $node->safe_psql('postgres',
		"SELECT event_id::text FROM outbox_messages WHERE topic = 'secret'"),
	$dead->[0]{headers}{original_event_id},
	'and the original event_id');
ok( wait_for_sql($node,
		"SELECT abandoned = 1 AND abandoned_last_hour = 1 FROM outbox_stats WHERE topic = 'secret'"),
	'outbox_stats shows it');

# --- retry: the abandoned event is published once the cause is gone
is( $node->safe_psql('postgres', "SELECT outbox_retry_abandoned('secret')"),
	'1', 'outbox_retry_abandoned puts it back');
ok(wait_for_sql($node, "SELECT count(*) = 0 FROM outbox_messages WHERE topic = 'secret'"),
	'it is delivered (and deleted: retention 0)');
is(scalar @{ kafka_read($broker, 'secret') }, 1, 'it arrived');

# --- outbox_worker_status through a broker outage
$broker->command('down -1');
$node->safe_psql('postgres', "SELECT outbox_enqueue('outage', 'e'::text)");
ok(wait_for_sql($node,
		"SELECT state = 'broker unreachable' AND brokers_up = 0 FROM outbox_worker_status()"),
	'the status says the broker is unreachable, no broker up');
is( $node->safe_psql('postgres',
		"SELECT pending FROM outbox_stats WHERE topic = 'outage'"),
	'1', 'outbox_stats shows the backlog');
$broker->command('up -1');
ok(wait_for_sql($node, "SELECT count(*) = 0 FROM outbox_messages WHERE topic = 'outage'"),
	'the backlog drains once the broker is back');
ok(wait_for_sql($node, "SELECT state = 'idle' AND brokers_up = 1 FROM outbox_worker_status()"),
	'and the status is idle again, one broker up');
ok( $node->safe_psql('postgres',
		"SELECT published >= 3500 AND failed >= 1 AND last_batch_at > now() - interval '1 minute' FROM outbox_worker_status()"
	) eq 't',
	'it counted what it published and what failed');

$node->stop;
$broker->stop;
done_testing();
