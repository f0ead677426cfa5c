
# Workers on demand: more databases with the extension than background
# workers.  With max_worker_processes = 5 (PostgreSQL's logical
# replication launcher, the outbox launcher and three workers), six
# databases are all served: a worker idle for outbox.worker_idle_timeout,
# with nothing left to do, gives its slot back while another database
# waits for one, and the next commit in its database starts it again.
# Events enqueued in bursts, the workers parking between them, arrive
# each once, in the order of their key.  CREATE EXTENSION warns when no
# background worker is left for the database.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker) = outbox_node_with_broker(
	'demand',
	'max_worker_processes' => 5,
	'outbox.worker_idle_timeout' => '300ms',
	'outbox.poll_interval' => '200ms');
my @dbs = ('postgres', map { "db$_" } 1 .. 5);

# --- the warning: the launcher and three workers take every slot
for my $db (qw(db1 db2))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	my ($ret, $out, $err) = $node->psql($db, 'CREATE EXTENSION outbox');
	is($err, '', "$db: CREATE EXTENSION with a background worker free warns of nothing");
	ok(wait_for_sql($node, "SELECT pid IS NOT NULL FROM outbox_worker_status() WHERE database = '$db'"),
		"$db: its worker runs");
}
ok( wait_for_sql($node,
		"SELECT count(*) = 3 FROM outbox_worker_status() WHERE pid IS NOT NULL AND state = 'idle'"),
	'three databases, three workers');
$node->safe_psql('postgres', 'CREATE DATABASE db3');
my ($ret, $out, $err) = $node->psql('db3', 'CREATE EXTENSION outbox');
is($ret, 0, 'CREATE EXTENSION succeeds with no background worker free');
like(
	$err,
	qr/WARNING:  no background worker is free for the outbox worker of this database\n.*DETAIL:  Of max_worker_processes \(5\), the launchers take 2 and the outbox workers of other databases 3; outbox.max_workers is 8\./s,
	'and warns that none is left for its worker');
for my $db (qw(db4 db5))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION outbox');
}

# --- one event in each of six databases: each is published
my $log_offset = -s $node->logfile;
$node->safe_psql($_, "SELECT outbox_enqueue('$_.one', '$_'::text)") for @dbs;
for my $db (@dbs)
{
	my $records = wait_for_records($broker, "$db.one", 1, 60);
	is_deeply([ map { $_->{payload} } @$records ], [$db], "$db: its event is published");
}
like(slurp_file($node->logfile, $log_offset),
	qr/outbox worker gives its slot to a database that waits for one, after \d+ ms idle/,
	'idle workers gave their slots to the databases that waited');
ok( wait_for_sql($node,
		"SELECT count(*) > 0 FROM outbox_worker_status() WHERE state = 'parked' AND pid IS NULL AND last_error LIKE 'gave the worker back, idle while another database waited%'"
	),
	'a parked database shows as parked, with why, and no process');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM outbox_worker_status() WHERE state NOT IN ('idle', 'parked', 'waiting for worker slot', 'starting')"),
	'0', 'no database is in another state');

# --- a commit in a parked database starts its worker again
my $parked = $node->safe_psql('postgres',
	"SELECT min(database) FROM outbox_worker_status() WHERE state = 'parked'");
$node->safe_psql($parked, "SELECT outbox_enqueue('$parked.woken', 'x'::text)");
is(scalar @{ wait_for_records($broker, "$parked.woken", 1, 30) }, 1,
	"a commit in parked $parked has its event published");

# --- bursts, the workers parking between them: nothing lost, duplicated
# or reordered
$log_offset = -s $node->logfile;
for my $round (0 .. 3)
{
	for my $db (@dbs)
	{
		$node->safe_psql($db,
			    "SELECT outbox_enqueue('$db.burst', i::text, key => 'k') FROM generate_series("
			  . ($round * 25 + 1) . ', '
			  . ($round * 25 + 12)
			  . ') i; '
			  . "SELECT outbox_enqueue('$db.burst', i::text, key => 'k') FROM generate_series("
			  . ($round * 25 + 13) . ', '
			  . ($round * 25 + 25) . ') i');
	}
	usleep(800_000);
}
for my $db (@dbs)
{
	my $records = wait_for_records($broker, "$db.burst", 100, 90);
	is_deeply([ map { $_->{payload} } @$records ],
		[ 1 .. 100 ], "$db: its 100 events, each once, in the order of their key");
}
my $parks = () = slurp_file($node->logfile, $log_offset) =~ /gives its slot to a database that waits/g;
ok($parks > 0, "workers parked between the bursts ($parks times)");

$node->stop;
$broker->stop;
done_testing();
