# Several Kafka clusters: topics go to the cluster their pattern names, a
# producer each.  A cluster that is down holds back its own topics only:
# the others' events keep arriving, its own wait, and none is lost,
# charged an attempt or reordered when it is back.  A pattern moved to
# another cluster while its events are in flight keeps every key's order.
# Each producer is named by its brokers and properties file, in the status,
# outbox_health and the log (once each way per outage); a hundred clusters
# all show, and one of them down among them is seen.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $main) = outbox_node_with_broker(
	'clusters',
	'outbox.poll_interval' => '100ms',
	'outbox.batch_size' => '50');
my $other = start_broker(1);

# Enqueue events $from..$to of $topic, {"n": i}, in five keys.
sub enqueue { enqueue_events($node, @_, keys => 5); }

# --- topics routed by pattern, a producer per cluster
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('billing.*', '$other->{bootstrap}')");
enqueue('orders', 1, 100);
enqueue('billing.invoices', 1, 100);
ok(all_published($node, 'orders') && all_published($node, 'billing.invoices'),
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
is( $node->safe_psql(
		'postgres', "SELECT status, detail FROM outbox_health WHERE signal = 'brokers'"),
	'ok|2 clusters, all up',
	'outbox_health counts clusters, not brokers, when all are up');

# --- a pattern that names the outbox.* settings' brokers (and file: none)
# is that cluster: it shares its producer, one row of the status
$node->safe_psql('postgres',
	"SELECT outbox_set_topic('same.*', '$main->{bootstrap}')");
enqueue('same.orders', 1, 10);
ok(all_published($node, 'same.orders'), 'events of a pattern naming the main brokers are published');
is(distinct_events(kafka_read($main, 'same.orders')), 10, 'on the main cluster');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ' ' || count(DISTINCT brokers) FROM outbox_cluster_status() WHERE database = current_database()"
	),
	'2 2',
	'the pattern shares the main cluster\'s producer: still one row each');
$node->safe_psql('postgres', "SELECT outbox_reset_topic('same.*')");

# --- the other cluster down: the main one's topics go on, its own wait
$other->command('down -1');
enqueue('billing.invoices', 101, 300);
ok( wait_for_sql(
		$node,
		"SELECT state = 'unreachable' FROM outbox_cluster_status() WHERE brokers = '$other->{bootstrap}'"
	),
	'the cluster that is down shows as unreachable');
enqueue('orders', 101, 300);
ok(all_published($node, 'orders'),
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
	"critical|1 of 2 clusters unreachable, their topics' events wait: $other->{bootstrap}",
	'outbox_health says which cluster is down, of how many');

$other->command('up -1');
ok(all_published($node, 'billing.invoices'),
	'once it is back its events are published');
is($node->safe_psql('postgres', "SELECT status FROM outbox_health WHERE signal = 'brokers'"),
	'ok', 'and outbox_health is well again');
my $billing = kafka_read($other, 'billing.invoices');
is(distinct_events($billing), 300, 'none lost');
ok(keys_in_order(records_by_key($billing)), 'none reordered within its key');
ok($node->log_contains("Kafka cluster $other->{bootstrap} is reachable again"),
	'the resumption is logged');

# A properties file made for the test: a comment only, readable by the
# server alone.
my $dir = $node->basedir . '/properties';
mkdir $dir or die "mkdir $dir: $!";

sub properties_file
{
	my ($name) = @_;
	my $file = "$dir/$name.properties";
	open my $fh, '>', $file or die "$file: $!";
	print $fh "# $name\n";
	close $fh;
	chmod 0600, $file;
	return $file;
}

# How many lines of the server's log since $offset match $re.
sub log_count
{
	my ($offset, $re) = @_;
	my @lines = grep { /$re/ } split /\n/, slurp_file($node->logfile, $offset);
	return scalar @lines;
}

# --- a topic with a properties file of its own on the main cluster's
# brokers: a producer of its own, told apart from the main one everywhere
my $own = properties_file('own');
$node->safe_psql('postgres', "SELECT outbox_set_topic('own.*', NULL, '$own')");
enqueue('own.events', 1, 50);
enqueue('orders', 301, 350);
ok(all_published($node, 'own.events') && all_published($node, 'orders'),
	'a topic with a properties file of its own is published');
is(distinct_events(kafka_read($main, 'own.events')), 50, 'to the main cluster\'s brokers');
my $rows = "SELECT string_agg(brokers || ' [' || properties_file || '] ' || state, ', '"
  . ' ORDER BY brokers COLLATE "C", properties_file COLLATE "C")'
  . ' FROM outbox_cluster_status() WHERE database = current_database()';
my @up = map { "$_->[0] [$_->[1]] up" }
  sort { $a->[0] cmp $b->[0] || $a->[1] cmp $b->[1] }
  ([ $main->{bootstrap}, '' ], [ $main->{bootstrap}, $own ], [ $other->{bootstrap}, '' ]);
ok(wait_for_sql($node, "SELECT ($rows) = '" . join(', ', @up) . "'"),
	'outbox_cluster_status() shows its producer as a row of its own, named by its file')
  or diag($node->safe_psql('postgres', $rows));
is( $node->safe_psql(
		'postgres',
		"SELECT brokers_up = (SELECT sum(m) FROM (SELECT max(brokers_up) m FROM outbox_cluster_status() GROUP BY brokers) c)"
		  . " FROM outbox_worker_status() WHERE database = current_database()"),
	't',
	'the worker\'s brokers_up counts each cluster\'s brokers once');

# the main cluster down: both of its producers say so once, and once again
# when it is back
my $offset = -s $node->logfile;
$main->command('down -1');
enqueue('own.events', 51, 60);
enqueue('orders', 351, 360);
my $main_down = "$main->{bootstrap}; $main->{bootstrap} (properties file $own)";
ok( wait_for_sql(
		$node,
		"SELECT status = 'critical' AND detail = '2 of 3 clusters unreachable, their topics'' events wait: $main_down'"
		  . " FROM outbox_health WHERE signal = 'brokers'"),
	'outbox_health names both producers of the cluster that is down')
  or diag($node->safe_psql('postgres', "SELECT detail FROM outbox_health WHERE signal = 'brokers'"));
sleep 3;	# librdkafka says all brokers down again as it retries
$main->command('up -1');
ok(all_published($node, 'own.events') && all_published($node, 'orders'),
	'once it is back every event is published');
ok($node->wait_for_log(qr/Kafka cluster \Q$main->{bootstrap} (properties file $own)\E is reachable again/, $offset),
	'the producer with its own file says it is reachable again');
for my $name ($main->{bootstrap}, "$main->{bootstrap} (properties file $own)")
{
	is(log_count($offset, qr/Kafka cluster \Q$name\E is unreachable: no broker answers/),
		1, "one line says that $name is unreachable");
	is(log_count($offset, qr/Kafka cluster \Q$name\E is reachable again/),
		1, "one line says that it is reachable again");
}
$node->safe_psql('postgres', "SELECT outbox_reset_topic('own.*')");

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
ok(all_published($node, 'billing.moved'),
	'every event is published after the move');
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

# --- a hundred clusters (a properties file each, on the main brokers), and
# one more whose brokers refuse connections, with events waiting: every
# one is listed, that one unreachable, and outbox_health says so
$node->safe_psql('postgres',
	join(';', map { "SELECT outbox_set_topic('c$_.*', NULL, '" . properties_file("c$_") . "')" } 1 .. 100));
my $refusing = '127.0.0.1:' . PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql('postgres', "SELECT outbox_set_topic('zz.*', '$refusing')");
enqueue('zz.events', 1, 10);
ok( wait_for_sql(
		$node,
		"SELECT state = 'unreachable' FROM outbox_cluster_status() WHERE brokers = '$refusing'"),
	'the cluster that is down is listed, unreachable, beside a hundred others');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ' ' || count(DISTINCT (brokers, properties_file)) FROM outbox_cluster_status() WHERE database = current_database()"
	),
	'102 102',
	'each cluster is listed once: the main one, the hundred, the one that is down');
is( $node->safe_psql('postgres', "SELECT status || '|' || detail FROM outbox_health WHERE signal = 'brokers'"),
	"critical|1 of 102 clusters unreachable, their topics' events wait: $refusing",
	'outbox_health says it is down, of how many');
is($node->safe_psql('postgres', "SELECT count(*) FROM outbox_messages WHERE topic = 'zz.events' AND status = 'pending'"),
	'10', 'its events wait');

# --- a database still at 1.3: outbox_cluster_status() fills the columns of
# its declaration there, which has no properties_file; the update says who
# loses EXECUTE on the function it replaces
$node->safe_psql('postgres', 'CREATE DATABASE old; CREATE ROLE watcher');
$node->safe_psql('old',
	"CREATE EXTENSION outbox VERSION '1.3'; GRANT EXECUTE ON FUNCTION outbox_cluster_status() TO watcher");
is( $node->safe_psql(
		'old',
		"SELECT count(*) || ' ' || count(*) FILTER (WHERE state = 'unreachable' AND brokers = '$refusing')"
		  . " || ' ' || bool_and(state IN ('up', 'unreachable', 'closed') AND brokers ~ '^127\\.0\\.0\\.1:[0-9]+\$')"
		  . " FROM outbox_cluster_status() WHERE database = 'postgres'"),
	'102 1 true',
	'at 1.3, outbox_cluster_status() shows every cluster in the columns 1.3 declares');
my ($ret, $out, $err) = $node->psql('old', 'ALTER EXTENSION outbox UPDATE');
like(
	$err,
	qr/WARNING:  EXECUTE on outbox_cluster_status\(\) is granted to watcher, and the update replaces the function\n.*HINT:  Once the update is done: GRANT EXECUTE ON FUNCTION public.outbox_cluster_status\(\) TO watcher;/s,
	'the update to 1.4 says whose EXECUTE on outbox_cluster_status() it takes away, and how to give it back');
is( $node->safe_psql(
		'old',
		"SELECT has_function_privilege('watcher', 'outbox_cluster_status()', 'EXECUTE'), "
		  . "(SELECT count(*) FROM outbox_cluster_status() WHERE properties_file <> '')"),
	'f|100',
	'at 1.4 the function has properties_file, and watcher has to be granted it again');

$node->stop;
$main->stop;
$other->stop;
done_testing();
