
# Databases take turns on the workers.  Under PostgreSQL's default
# max_worker_processes (8: six for outbox workers and owner lookups) and
# the default outbox settings, eight databases where a role with only
# EXECUTE on outbox_enqueue commits an event every 1.5 s (less than
# outbox.worker_idle_timeout: their workers are never idle), and four
# more databases that enqueue: every event of each of them is published
# within 15 s of its commit, each once, in the order of its key.  A worker
# that has had its time slice while another database waits gives its
# slot, as the log says, and databases waiting for a slot say they are
# served in their turn, as outbox_worker_status() and outbox_health say (a
# warning, not critical).  Meanwhile DROP DATABASE of a database
# that waits for a worker and never had an event succeeds; that of one
# with an event is refused, saying why.  A worker that gives its slot
# with an event in a retry backoff waits for its turn, and its database
# is served again with no commit there.  A worker waiting for a cluster
# that hangs, asked for its slot, hands off its batch and gives it.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $TICK = 1.5;
my $BOUND = 15;

my ($node, $broker) = outbox_node_with_broker('turns');
is($node->safe_psql('postgres', 'SHOW max_worker_processes'), '8',
	'max_worker_processes is the default');

my @trickling = map { "trickle$_" } 1 .. 8;
my @busy = map { "busy$_" } 1 .. 4;
$node->safe_psql('postgres', 'CREATE ROLE trickler LOGIN');
for my $db (@trickling, @busy)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, q{
		CREATE EXTENSION outbox;
		DO $$
		DECLARE f regprocedure;
		BEGIN
			FOR f IN SELECT oid FROM pg_proc WHERE proname = 'outbox_enqueue' LOOP
				EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO trickler', f);
			END LOOP;
		END
		$$});
}
$node->safe_psql('postgres', 'CREATE DATABASE stalled');
$node->safe_psql('postgres',
	"ALTER DATABASE stalled SET outbox.delivery_timeout = '500ms'; ALTER DATABASE stalled SET outbox.retry_base_delay = '3s'"
);
$node->safe_psql('stalled', 'CREATE EXTENSION outbox');
my $hanging = start_broker(1);
$node->safe_psql('postgres', 'CREATE DATABASE hung');
$node->safe_psql('postgres', "ALTER DATABASE hung SET outbox.brokers = '$hanging->{bootstrap}'");
$node->safe_psql('hung', 'CREATE EXTENSION outbox');

# one session per database: the trickling ones as the role with EXECUTE
# on outbox_enqueue only
my %session;
$session{$_} = $node->background_psql($_, extra_params => [ '-U', 'trickler' ])
  for @trickling;
$session{$_} = $node->background_psql($_) for @busy;
# the sessions live for minutes: time each query, not the session
$_->set_query_timer_restart for values %session;

# enqueue $n events of key k in $db, numbered on from what it enqueued
my %sent;
sub enqueue
{
	my ($db, $n) = @_;
	my $first = ($sent{$db} // 0) + 1;
	my $last = $first + $n - 1;
	$session{$db}->query_safe(
		"SELECT outbox_enqueue('turns.$db', i::text, key => 'k') FROM generate_series($first, $last) i"
	);
	$sent{$db} = $last;
}

# --- the trickle starts; once every worker slot is taken, the others
# enqueue too; outbox_worker_status() and outbox_health are read at
# each tick
my ($waiting_in_turn, $critical, $turn_warning) = (0, '', 0);
my ($quiet_dropped, $loaded_refusal);
for my $tick (1 .. 30)
{
	my $start = time;
	enqueue($_, 1) for @trickling;
	enqueue($_, 5) for $tick >= 6 ? @busy : ();

	$waiting_in_turn += $node->safe_psql('postgres',
		"SELECT count(*) FROM outbox_worker_status() WHERE state = 'waiting for worker slot' AND last_error ~ '; databases waiting: [0-9]+, each served in its turn\$'"
	);
	for my $row (split /\n/,
		$node->safe_psql('busy1',
			"SELECT signal || '|' || status || '|' || detail FROM outbox_health WHERE signal IN ('worker', 'worker slots')"))
	{
		my ($signal, $status, $detail) = split /\|/, $row, 3;
		$critical .= "$signal: $detail\n" if $status eq 'critical';
		$turn_warning++
		  if $signal eq 'worker slots' && $status eq 'warning'
		  && $detail =~ /waiting for one: .*each served in its turn/;
	}

	# --- DROP DATABASE, while every slot is taken: a database with the
	# extension and no event, waiting for a worker, is dropped; one with
	# an event that no worker has published is not
	if ($tick == 12)
	{
		$node->safe_psql('postgres', 'CREATE DATABASE quiet');
		$node->safe_psql('quiet', 'CREATE EXTENSION outbox');
		ok( wait_for_sql($node,
				"SELECT state = 'waiting for worker slot' FROM outbox_worker_status() WHERE database = 'quiet'", 10),
			'a database with the extension and no event waits for a worker');
		my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE quiet');
		$quiet_dropped = $err;

		$node->safe_psql('postgres', 'CREATE DATABASE loaded');
		$node->safe_psql('postgres', 'ALTER DATABASE loaded SET outbox.enabled = off');
		$node->safe_psql('loaded', "CREATE EXTENSION outbox; SELECT outbox_enqueue('loaded.t', 'x'::text)");
		($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE loaded',
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		$loaded_refusal = $err;
	}
	usleep(1_000_000 * ($start + $TICK - time)) if $start + $TICK > time;
}

is($quiet_dropped, '', 'DROP DATABASE of a database waiting for a worker, that never had an event, succeeds');
like(
	$loaded_refusal,
	qr/ERROR:  2BP01: database "loaded" may hold events of extension outbox that are not delivered\nDETAIL:  A transaction there may have added some \(an enqueue, a restore, a retry, a snapshot\) since its worker last looked, or since the extension was created\./,
	'DROP DATABASE of one with an event that no worker published is refused, saying why');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'loaded'"),
	'1', 'and that database is still there');

# --- every event published within the bound, each once, in its order
for my $db (@trickling, @busy)
{
	ok( wait_for_sql($node,
			"SELECT bool_and(status = 'published') AND count(*) = $sent{$db} FROM outbox_messages",
			30, $db),
		"$db: its $sent{$db} events are published");
	my $slowest = $node->safe_psql($db,
		"SELECT round(max(extract(epoch FROM published_at - created_at))::numeric, 1) FROM outbox_messages");
	cmp_ok($slowest, '<=', $BOUND,
		"$db: each within $BOUND s of its commit (the slowest took $slowest s)");
	is_deeply([ map { $_->{payload} } @{ wait_for_records($broker, "turns.$db", $sent{$db}, 10) } ],
		[ 1 .. $sent{$db} ], "$db: each once, in the order of its key");
}

# --- and said so on the way
# (whether a database that gave its slot had events left, and so waits
# for its turn, is chance here: the stalled database below has one; the
# launcher logs the first slice given, and then one a minute: the first
# may be the set-up's)
like(
	slurp_file($node->logfile),
	qr/LOG:  databases take turns on the outbox workers: the worker of database "[a-z0-9]+" gives its slot to database "[a-z0-9]+" after its time slice of 5000 ms/,
	'workers gave their slots to waiting databases after their time slice, and the log said so');
ok($waiting_in_turn > 0, "databases waiting for a worker said that each is served in its turn ($waiting_in_turn times seen)");
is($critical, '', 'outbox_health never said critical of the worker or its slots');
ok($turn_warning > 0, 'its worker slots signal warned that databases wait, each in its turn');

# --- an event in a retry backoff, while the trickle goes on: its worker
# gives its slot with it left, and the database is served again in its
# turn, with no commit there since (its wait may be short: the status is
# read all through each tick)
$broker->command("topic_error turns.stalled $LEADER_NOT_AVAILABLE");
$node->safe_psql('stalled', "SELECT outbox_enqueue('turns.stalled', 'late'::text)");
my $stalled_gave = 0;
for my $tick (1 .. 16)
{
	my $start = time;
	enqueue($_, 1) for @trickling;
	$broker->command("topic_error turns.stalled 0") if $tick == 8;
	while (time < $start + $TICK)
	{
		$stalled_gave += $node->safe_psql('postgres',
			"SELECT count(*) FROM outbox_worker_status() WHERE database = 'stalled' AND state = 'waiting for worker slot' AND last_error LIKE 'gave its slot to database %'"
		);
		usleep(20_000);
	}
}
ok($stalled_gave > 0, 'a worker with an event in a retry backoff gave its slot, and waited for its turn');
ok( wait_for_sql($node,
		"SELECT status = 'published' AND attempts > 1 FROM outbox_messages WHERE topic = 'turns.stalled'",
		30, 'stalled'),
	'its event is published, retried, with no commit there since');

# --- seven databases on six workers, one of them waiting on a cluster
# that stops answering with its connections open: once asked for its
# slot, it hands off the batch that waits on the cluster and gives it
# within the launcher's grace, rather than when its delivery times out
# (outbox.delivery_timeout, 30 s); t/037_hung_turn.pl has it alone
my @six = @trickling[ 0 .. 5 ];
my $log_offset = -s $node->logfile;
$node->safe_psql('hung', "SELECT outbox_enqueue('turns.hung', 'first'::text)");
is(scalar @{ wait_for_records($hanging, 'turns.hung', 1, 30) }, 1, 'hung: its cluster answers at first');
$hanging->command('rtt 1 60000');
$node->safe_psql('hung', "SELECT outbox_enqueue('turns.hung', 'second'::text)");
ok( wait_for_activity($node, 'publishing 1 events'),
	'hung: its worker waits for its cluster, which does not answer');
my $phase = time;
for my $tick (1 .. 16)
{
	my $start = time;
	enqueue($_, 1) for @six;
	usleep(1_000_000 * ($start + $TICK - time)) if $start + $TICK > time;
}
$_->quit for values %session;
for my $db (@six)
{
	ok( wait_for_sql($node,
			"SELECT bool_and(status = 'published') AND count(*) = $sent{$db} FROM outbox_messages",
			30, $db),
		"$db: its events are published while a worker waits on a cluster that hangs");
	my $slowest = $node->safe_psql($db,
		"SELECT round(max(extract(epoch FROM published_at - created_at))::numeric, 1) FROM outbox_messages WHERE created_at >= to_timestamp($phase)"
	);
	cmp_ok($slowest, '<=', $BOUND, "$db: each within $BOUND s of its commit (the slowest took $slowest s)");
}
unlike(slurp_file($node->logfile, $log_offset),
	qr/the outbox worker of database "hung" has not given its slot/,
	'the worker waiting on a cluster that hangs gave its slot in time');
$hanging->command('rtt 1 0');

$node->stop;
$broker->stop;
$hanging->stop;
done_testing();
