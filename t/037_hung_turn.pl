
# A database whose one cluster hangs (it answered, then answers nothing
# with its connections open) holds back no other database's turn, though
# it takes every worker (outbox.max_workers = 1): once asked for its slot,
# its worker hands off the batch that waits on the cluster and gives the
# slot, rather than wait for the delivery to time out (30 s).  The other
# database's events are published within 10 s of their commit; once the
# cluster answers again, every event that waited is published, in the
# order of its key, and each charged no attempt.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $BOUND = 10;

my ($node, $broker) = outbox_node_with_broker(
	'yield',
	'outbox.max_workers' => '1',
	'outbox.poll_interval' => '100ms');
my $hanging = start_broker(1);
$node->safe_psql('postgres', 'CREATE DATABASE hung');
$node->safe_psql('postgres', "ALTER DATABASE hung SET outbox.brokers = '$hanging->{bootstrap}'");
$node->safe_psql('hung', 'CREATE EXTENSION outbox');

enqueue_events($node, 'yield.hung', 1, 3, keys => 3, dbname => 'hung');
is(scalar @{ wait_for_records($hanging, 'yield.hung', 3, 60) }, 3, 'its cluster answers at first');
$hanging->command('rtt 1 60000');
enqueue_events($node, 'yield.hung', 4, 9, keys => 3, dbname => 'hung');

# an event a second in postgres, while the worker waits on the cluster
my $phase = time;
for my $n (1 .. 15)
{
	my $start = time;
	enqueue_events($node, 'yield.healthy', $n, $n);
	usleep(1_000_000 * ($start + 1 - time)) if $start + 1 > time;
}
ok(all_published($node, 'yield.healthy', 30), 'the other database: its events are published');
my $slowest = $node->safe_psql('postgres',
	"SELECT round(max(extract(epoch FROM published_at - created_at))::numeric, 1) FROM outbox_messages WHERE topic = 'yield.healthy'"
);
cmp_ok($slowest, '<=', $BOUND,
	"the other database: each within $BOUND s of its commit (the slowest took $slowest s)");

$hanging->command('rtt 1 0');
ok( wait_for_sql($node,
		"SELECT bool_and(status = 'published') AND count(*) = 9 AND max(attempts) = 1 FROM outbox_messages",
		90, 'hung'),
	'once its cluster answers, every event that waited is published, charged no attempt');
my $records = wait_for_records($hanging, 'yield.hung', 9, 30);
ok(keys_in_order(records_by_key($records)), 'in the order of each key');

$node->stop;
$broker->stop;
$hanging->stop;
done_testing();
