
# One server, several databases: a worker per database that has the
# extension, each publishing its own events to its own cluster; CREATE
# EXTENSION starts one within 5 s, DROP EXTENSION stops it, DROP DATABASE
# succeeds, a terminated worker comes back without disturbing the others,
# and outbox.max_workers is reported when a database waits for a worker.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker_a) =
  outbox_node_with_broker('databases', 'outbox.poll_interval' => '200ms');
my $broker_b = start_broker(1);
# the extension in postgres (created by outbox_node_with_broker) has a
# worker too
for my $db (qw(db1 db2 db3 plain))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
}
$node->safe_psql($_, 'CREATE EXTENSION outbox') for qw(db1 db2 db3);

# workers whose state is idle, as "database:pid" sorted by database
sub workers
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(database || ':' || pid, ' ' ORDER BY database) FROM outbox_worker_status() WHERE state = 'idle'"
	);
}

ok( wait_for_sql($node,
		"SELECT array_agg(database::text ORDER BY database) = '{db1,db2,db3,postgres}' AND bool_and(state = 'idle') FROM outbox_worker_status()"
	),
	'a worker per database with the extension, none for the one without');
is( $node->safe_psql('db1',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker'"),
	'4', 'four workers show in pg_stat_activity');

# --- each database's events arrive on its own topics, and only there
for my $db (qw(db1 db2 db3))
{
	$node->safe_psql($db,
		"SELECT outbox_enqueue('$db.t', '$db-' || i, key => 'k') FROM generate_series(1, 5) i");
}
for my $db (qw(db1 db2 db3))
{
	my $records = wait_for_records($broker_a, "$db.t", 5, 20);
	is_deeply([ map { $_->{payload} } @$records ],
		[ map { "$db-$_" } 1 .. 5 ], "$db: its five events, in order, on $db.t");
}
is($node->safe_psql('plain', "SELECT count(*) FROM pg_extension WHERE extname = 'outbox'"),
	'0', 'the database without the extension has nothing to publish');

# --- ALTER DATABASE ... SET sends one database's events to another cluster
$node->safe_psql('postgres',
	"ALTER DATABASE db3 SET outbox.brokers = '$broker_b->{bootstrap}'");
# (the extension's schema stays a superuser's: the database's owner would
# own public, pg_database_owner's, and could rename it)
$node->safe_psql('postgres', 'CREATE ROLE app_owner LOGIN; ALTER DATABASE db2 OWNER TO app_owner');
$node->safe_psql('db2', 'ALTER SCHEMA public OWNER TO postgres');
my ($ret, $out, $err) = $node->psql('db2',
	"ALTER DATABASE db2 SET outbox.brokers = 'evil:9092'",
	extra_params => [ '-U', 'app_owner' ]);
like($err, qr/permission denied to set parameter "outbox.brokers"/,
	'the owner of a database, no superuser, cannot send its events elsewhere');
ok( wait_for_sql($node,
		"SELECT state = 'idle' AND brokers_up = 1 AND started_at > now() - interval '20 seconds' FROM outbox_worker_status() WHERE database = 'db3'"
	),
	'db3\'s worker started again with its new setting');
$node->safe_psql($_, "SELECT outbox_enqueue('$_.after', 'x'::text)") for qw(db1 db3);
is(scalar @{ wait_for_records($broker_b, 'db3.after', 1, 20) }, 1, 'db3 now publishes to cluster B');
is(scalar @{ wait_for_records($broker_a, 'db1.after', 1, 20) }, 1, 'db1 still to cluster A');
is(scalar @{ kafka_read($broker_a, 'db3.after') }, 0, 'and db3 no longer to cluster A');

# --- CREATE EXTENSION in a running server: publishing within 5 s
my $start = time;
$node->safe_psql('plain', 'CREATE EXTENSION outbox');
$node->safe_psql('plain', "SELECT outbox_enqueue('plain.t', 'first'::text)");
is(scalar @{ wait_for_records($broker_a, 'plain.t', 1, 10) }, 1, 'CREATE EXTENSION: its first event arrives');
ok( wait_for_sql($node, "SELECT bool_and(status = 'published') FROM outbox_messages WHERE topic = 'plain.t'",
		10, 'plain'),
	'and is recorded');
# (from its commit to its recorded delivery: the worker started at once,
# not at the launcher's next look at the databases, 5 s apart)
ok( $node->safe_psql('plain',
		"SELECT published_at - created_at < interval '4 seconds' FROM outbox_messages WHERE topic = 'plain.t'"
	) eq 't',
	'within seconds of CREATE EXTENSION');

# --- ending one worker leaves the others publishing; it comes back
my $db1_pid = $node->safe_psql('postgres',
	"SELECT pid FROM outbox_worker_status() WHERE database = 'db1'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($db1_pid)");
$node->safe_psql('db2', "SELECT outbox_enqueue('db2.during', 'x'::text)");
$node->safe_psql('db1', "SELECT outbox_enqueue('db1.during', 'x'::text)");
is(scalar @{ wait_for_records($broker_a, 'db2.during', 1, 20) }, 1,
	'db2 publishes while db1\'s worker is gone');
ok( wait_for_sql($node,
		"SELECT state = 'idle' AND pid <> $db1_pid FROM outbox_worker_status() WHERE database = 'db1'", 10),
	'db1\'s worker is back within seconds');
is(scalar @{ wait_for_records($broker_a, 'db1.during', 1, 10) }, 1, 'and publishes what waited');

# --- DROP EXTENSION stops its worker
$node->safe_psql('db2', 'DROP EXTENSION outbox');
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_worker_status() WHERE database = 'db2'", 15),
	'DROP EXTENSION: its worker stops within seconds');
sleep 2;
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND datname = 'db2'"),
	'0', 'and is not started again');

# --- DROP DATABASE of a served database, without FORCE
$start = time;
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE db3');
is($ret, 0, 'DROP DATABASE of a served database succeeds') or diag $err;
ok(time - $start < 5, 'within 5 seconds');
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_worker_status() WHERE database = 'db3'", 10),
	'the launcher forgets it');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker'"),
	'3', 'and does not start its worker again: db1, plain and postgres have theirs');

# --- a launcher that starts again does not double the workers
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox launcher'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox launcher' AND pid <> $launcher"),
	'the launcher starts again');
ok( wait_for_sql($node,
		"SELECT count(*) = 3 AND bool_and(state = 'idle') FROM outbox_worker_status()", 20),
	'and serves the three databases again');
sleep 2;
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker'"),
	'3', 'with one worker each, not two');
$node->safe_psql('db1', "SELECT outbox_enqueue('db1.relaunched', 'x'::text)");
is(scalar @{ wait_for_records($broker_a, 'db1.relaunched', 1, 10) }, 1, 'which publish');

# --- outbox.max_workers: a database that waits for a worker is reported
# (idle workers keep their slots: t/024_on_demand.pl has them given back)
$node->append_conf('postgresql.conf', "outbox.max_workers = 2\noutbox.worker_idle_timeout = -1\n");
$node->restart;
ok( wait_for_sql($node,
		"SELECT count(*) FILTER (WHERE state = 'idle') = 2 AND count(*) FILTER (WHERE state = 'waiting for worker slot' AND last_error = 'all outbox.max_workers (2) workers are busy' AND pid IS NULL) = 1 FROM outbox_worker_status()"
	),
	'with outbox.max_workers = 2, the third database waits, and the status says why');
my $waiting = $node->safe_psql('postgres',
	"SELECT database FROM outbox_worker_status() WHERE state = 'waiting for worker slot'");
like(slurp_file($node->logfile), qr/database "$waiting" waits for a worker: all outbox.max_workers \(2\) workers are busy/,
	'the log says which database waits');
my $running = $node->safe_psql('postgres',
	"SELECT min(database) FROM outbox_worker_status() WHERE state = 'idle'");
$node->safe_psql($running, 'DROP EXTENSION outbox');
ok( wait_for_sql($node,
		"SELECT state = 'idle' FROM outbox_worker_status() WHERE database = '$waiting'", 10),
	'it gets a worker as soon as one is free');

$node->stop;
$broker_a->stop;
$broker_b->stop;
done_testing();
