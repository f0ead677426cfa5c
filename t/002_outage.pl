
# Broker outages and reconfiguration: an outage abandons nothing and costs
# no attempt; SIGHUP moves the worker to other brokers; a bad property is
# refused, named, without its value.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) = outbox_node_with_broker(
	'outage',
	'outbox.delivery_timeout' => '3s',
	'outbox.max_attempts' => '2');

# Enqueue events $from..$to of $topic, {"n": i}, in seven keys.
sub enqueue { enqueue_events($node, @_, keys => 7); }

# --- broker down, then up: nothing lost, nothing failed or abandoned
enqueue('outage', 1, 100);
ok(all_published($node), 'events published while the broker is up');

$broker->command('down -1');
enqueue('outage', 101, 400);
ok( wait_for_activity($node, 'no Kafka broker reachable'),
	'the worker says no broker is reachable');

# well past delivery_timeout and max_attempts' worth of attempts
sleep 8;
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM outbox_messages WHERE status IN ('failed', 'abandoned') OR (status = 'pending' AND attempts > 0)"
	),
	'0',
	'during the outage no event failed, was abandoned or spent an attempt');
ok( $node->safe_psql('postgres',
		"SELECT count(*) FROM outbox_messages WHERE status = 'pending'") > 0,
	'events wait as pending');

$broker->command('up -1');
ok(all_published($node, 'outage'),
	'once the broker is back every event is published');
is(missing_events($node, 'outage', @{ kafka_read($broker, 'outage') }),
	0, 'every committed event arrived');
ok($node->log_contains("Kafka cluster $broker->{bootstrap} is unreachable: no broker answers"),
	'the outage is logged');
ok($node->log_contains("Kafka cluster $broker->{bootstrap} is reachable again"),
	'and the resumption');

# --- SIGHUP to other brokers: the producer is rebuilt, nothing is lost
my $broker2 = start_broker(2);
enqueue('moved', 1, 200);
$node->safe_psql('postgres',
	"ALTER SYSTEM SET outbox.brokers = '$broker2->{bootstrap}'; SELECT pg_reload_conf()");
enqueue('moved', 201, 400);
ok(all_published($node, 'moved'),
	'events enqueued around the reload are published');
is( missing_events($node, 'moved',
		@{ kafka_read($broker, 'moved') }, @{ kafka_read($broker2, 'moved') }),
	0, 'every event arrived at the old or the new cluster');
enqueue('after-reload', 1, 10);
ok(all_published($node, 'after-reload'),
	'events after the reload are published');
is(scalar @{ kafka_read($broker2, 'after-reload') }, 10, 'to the new cluster');
ok($node->log_contains('Kafka settings changed, rebuilding the producer'),
	'the rebuild is logged');

# --- a bad outbox.kafka_properties is refused, naming the property
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"ALTER SYSTEM SET outbox.kafka_properties = 'compression.type=lz4;no.such.thing=1'");
isnt($ret, 0, 'ALTER SYSTEM refuses an unknown property');
like($stderr, qr/Kafka property "no.such.thing" is not allowed in outbox.kafka_properties/,
	'naming it');

# a bad value in postgresql.conf is refused at reload; the worker goes on
$node->append_conf('postgresql.conf', "outbox.kafka_properties = 'acks=maybe'\n");
$node->reload;
enqueue('after-bad-reload', 1, 10);
ok(all_published($node, 'after-bad-reload'),
	'the worker keeps publishing with the previous settings');
ok( $node->wait_for_log(
		qr/Kafka property "acks" is not allowed in outbox.kafka_properties/),
	'the bad value is reported in the log');
ok(!$node->log_contains('maybe'), 'without the value');

$node->stop;
$broker->stop;
$broker2->stop;
done_testing();
