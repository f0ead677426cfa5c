
# What hostile testing broke, with the worker and a broker: the worker runs
# as the extension's owner (here not even a superuser) and never runs a
# planted operator; per-key order holds when a produce request is refused;
# cancel cancels a batch, not the worker, and charges nothing; a failing
# batch pauses however many commits come; autovacuum sees the worker's
# writes; the status says why.

use strict;
use warnings;

use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker) = outbox_node_with_broker(
	'hardening',
	'outbox.poll_interval' => '100ms',
	'outbox.retry_base_delay' => '200ms',
	'outbox.retry_jitter' => '0',
	'autovacuum_naptime' => '1s');

# --- the worker runs as the role that owns the extension
$node->safe_psql(
	'postgres', q{
	DROP EXTENSION outbox;
	CREATE ROLE outbox_owner LOGIN SUPERUSER;
	SET ROLE outbox_owner;
	CREATE EXTENSION outbox;
	RESET ROLE;
	ALTER ROLE outbox_owner NOSUPERUSER;
});
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND usename = 'outbox_owner'"
	),
	'the worker connects as the owner of the extension');

# an owner that may not log in: the worker waits and says why, then runs
# as soon as the owner may
$node->safe_psql('postgres', 'ALTER ROLE outbox_owner NOLOGIN');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'outbox worker'");
ok( wait_for_sql($node,
		"SELECT state = 'waiting for extension' AND last_error = 'role \"outbox_owner\", which owns the extension, cannot log in' FROM outbox_worker_status()"
	),
	'an owner without LOGIN: the worker waits and the status says why');
is( $node->safe_psql('postgres', "SELECT status || '|' || detail FROM outbox_health WHERE signal = 'worker'"),
	'critical|waiting for extension: role "outbox_owner", which owns the extension, cannot log in',
	'outbox_health: a worker that cannot start is critical, and why');
$node->safe_psql('postgres', 'ALTER ROLE outbox_owner LOGIN');
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND usename = 'outbox_owner'"
	),
	'with LOGIN back, it runs as the owner again');
ok(wait_for_sql($node, "SELECT status = 'ok' FROM outbox_health WHERE signal = 'worker'"),
	'and outbox_health says ok again');

# --- a planted operator is never run by the worker
$node->safe_psql(
	'postgres', q{
	CREATE ROLE mallory LOGIN;
	GRANT CREATE, USAGE ON SCHEMA public TO mallory;
	SET ROLE mallory;
	CREATE TABLE public.mallory_log (ran_as name);
	GRANT INSERT ON public.mallory_log TO PUBLIC;
	CREATE FUNCTION public.status_eq(a outbox_status, b outbox_status) RETURNS boolean
	LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.mallory_log VALUES (current_user);
		BEGIN
			ALTER ROLE mallory SUPERUSER;
		EXCEPTION WHEN insufficient_privilege THEN NULL;
		END;
		RETURN a::text OPERATOR(pg_catalog.=) b::text;
	END $$;
	CREATE OPERATOR public.= (LEFTARG = outbox_status, RIGHTARG = outbox_status,
							  FUNCTION = public.status_eq);
	RESET ROLE;
});
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('planted', ('p' || i)::text, key => 'k') FROM generate_series(1, 20) i");
# (this test's own queries compare status as text: they run as a superuser
# with public on the search path, just what the worker must not do)
ok( wait_for_sql($node,
		"SELECT bool_and(status::text = 'published') FROM outbox_messages WHERE topic = 'planted'"),
	'the worker publishes beside a planted operator');
$node->safe_psql('postgres', 'SELECT outbox_purge()');
is( $node->safe_psql('postgres',
		"SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory') || ' ' || (SELECT count(*) FROM public.mallory_log)"),
	'false 0',
	'it never ran it, and mallory is no superuser');
$node->safe_psql('postgres', 'DROP OWNED BY mallory CASCADE; DROP ROLE mallory');

# --- per-key order when a Produce request is refused for good: with
# max_message_bytes = 2000 a batch of five 600-byte events goes out in three
# waves; the first wave's request is refused, and the key sends nothing more
# in that batch: the refused events are retried first, the rest untouched
reconfigure($node, "SET outbox.max_message_bytes = 2000");
$broker->command("produce_errors 1 $INVALID_TIMESTAMP");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('order.t', 'o' || i || repeat('.', 600), key => 'K') FROM generate_series(1, 5) i");
ok(all_published($node, 'order.t'),
	'every event of the key is published');
my @order = map { substr($_->{payload}, 0, 2) } @{ kafka_read($broker, 'order.t') };
is_deeply(\@order, [qw(o1 o2 o3 o4 o5)], "in their order, once each (Kafka has @order)");
is( $node->safe_psql('postgres',
		"SELECT string_agg(attempts::text || coalesce(':' || last_error, ''), ' ' ORDER BY id) FROM outbox_messages WHERE topic = 'order.t'"
	),
	'2:Broker: Invalid timestamp 2:Broker: Invalid timestamp 1 1 1',
	'only the refused request\'s events were charged an attempt');
reconfigure($node, "RESET outbox.max_message_bytes");

# --- per-key order across the batches of one transaction: with batches of
# two, the second batch of key K is claimed while the first is in flight;
# the first is refused, so the second must not be sent, nor the third
reconfigure($node, "SET outbox.batch_size = 2");
$broker->command("produce_errors 1 $INVALID_TIMESTAMP");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('batches.t', 'b' || i, key => 'K') FROM generate_series(1, 6) i");
ok(all_published($node, 'batches.t'),
	'every event of the key is published, across batches');
@order = map { $_->{payload} } @{ kafka_read($broker, 'batches.t') };
is_deeply(\@order, [qw(b1 b2 b3 b4 b5 b6)], "in their order, once each (Kafka has @order)");
is( $node->safe_psql('postgres',
		"SELECT string_agg(attempts::text, ' ' ORDER BY id) FROM outbox_messages WHERE topic = 'batches.t'"),
	'2 2 1 1 1 1',
	'only the refused batch was charged an attempt');
reconfigure($node, "RESET outbox.batch_size");

# --- a session that holds the first event of a key locked holds the key
# back: event 1 fails once, events 2 and 3 wait behind it; when 1 is due
# again an operator's session holds it (FOR UPDATE) for 2 s; the claim
# passes over it (SKIP LOCKED) but must not publish 2 and 3 first.  A
# retry delay of 1 s leaves the failed state long enough to be seen, and
# due again within the 2 s hold.
reconfigure($node, "SET outbox.retry_base_delay = '1s'");
$broker->command("produce_errors 1 $INVALID_TIMESTAMP");
my $first = $node->safe_psql('postgres',
	"SELECT outbox_enqueue('locked.t', 'l1'::text, key => 'K')");
ok(wait_for_status($node, $first, 'failed'),
	'the first event of the key failed once');
my ($in, $out, $err) = ('', '', '');
my $holder = IPC::Run::start(
	[
		'psql', '-X', '-d', $node->connstr('postgres'), '-c',
		"BEGIN; SELECT id FROM outbox_messages WHERE id = $first FOR UPDATE; "
		  . "SELECT outbox_enqueue('locked.t', 'l' || i, key => 'K') FROM generate_series(2, 3) i; "
		  . "SELECT pg_sleep(0); COMMIT; BEGIN; SELECT id FROM outbox_messages WHERE id = $first FOR UPDATE; SELECT pg_sleep(2); ROLLBACK;"
	],
	\$in, \$out, \$err);
$holder->finish;
ok(all_published($node, 'locked.t'),
	'all three are published once the lock is gone');
is_deeply([ map { $_->{payload} } @{ kafka_read($broker, 'locked.t') } ],
	[qw(l1 l2 l3)], 'in their order: the locked first one was not overtaken');
reconfigure($node, "RESET outbox.retry_base_delay");

# --- what enqueue accepts can be published: an event of exactly
# outbox.max_message_bytes (payload and key) is not refused as too large
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('big.t', repeat('x', 999990), key => '0123456789', headers => '{}')");
ok( wait_for_sql($node,
		"SELECT status = 'published' AND attempts = 1 FROM outbox_messages WHERE topic = 'big.t'"),
	'an event of exactly max_message_bytes is published on its first attempt');

# --- pg_cancel_backend cancels the batch in flight, not the worker, and
# the events it had not heard of are not charged
my $pid = worker_pid($node);
$broker->command('rtt 1 1500');
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('cancel.t', ('c' || i)::text, key => 'k') FROM generate_series(1, 3) i");
ok(wait_for_activity($node, 'publishing'), 'a batch is in flight');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok( wait_for_sql($node,
		"SELECT state = 'backing off' AND last_error LIKE 'canceling statement%' FROM outbox_worker_status()"
	),
	'the batch is canceled');
is( $node->safe_psql('postgres',
		"SELECT string_agg(status || ' ' || attempts, ',') FROM outbox_messages WHERE topic = 'cancel.t'"),
	'pending 0,pending 0,pending 0',
	'its events are due again, no attempt charged');
$broker->command('rtt 1 0');
ok( wait_for_sql($node,
		"SELECT bool_and(status = 'published' AND attempts = 1) FROM outbox_messages WHERE topic = 'cancel.t'"),
	'and published afterwards, on their first counted attempt');
is($node->safe_psql('postgres', 'SELECT pid FROM outbox_worker_status()'),
	$pid, 'by the same worker');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
sleep 1;
is($node->safe_psql('postgres', 'SELECT pid FROM outbox_worker_status()'),
	$pid, 'a cancel while idle does not end it either');

# --- a batch that keeps failing pauses 1, 2, 4 ... s whatever commits come
$node->safe_psql('postgres',
	'ALTER TABLE outbox_publish_stats ADD CONSTRAINT no_more CHECK (published < 0) NOT VALID');
my $log_offset = -s $node->logfile;
my $deadline = time + 6;
while (time < $deadline)
{
	$node->safe_psql('postgres', "SELECT outbox_enqueue('pause.t', 'x'::text)");
	usleep(100_000);
}
my $log = slurp_file($node->logfile, $log_offset);
my $failures = () = $log =~ /publishing batch failed/g;
ok($failures >= 2 && $failures <= 4,
	"60 commits in 6 s, but only $failures failed batches: the pause holds");
is( $node->safe_psql('postgres',
		"SELECT bool_and(status = 'pending' AND attempts = 0) FROM outbox_messages WHERE topic = 'pause.t'"),
	't', 'no attempt is charged for a batch that failed to record');
$node->safe_psql('postgres', 'ALTER TABLE outbox_publish_stats DROP CONSTRAINT no_more');
ok(all_published($node, 'pause.t'),
	'published once the error is gone');
ok( wait_for_sql($node,
		"SELECT state = 'idle' AND last_error IS NULL FROM outbox_worker_status()"),
	'the old error is cleared with the state');

# --- a broker outage says why in the status
$broker->command('down -1');
$node->safe_psql('postgres', "SELECT outbox_enqueue('outage.t', 'x'::text)");
ok( wait_for_sql($node,
		"SELECT state = 'broker unreachable' AND last_error LIKE 'no Kafka broker reachable at %' FROM outbox_worker_status()"
	),
	'brokers unreachable: the status says so, with the reason');
$broker->command('up -1');
ok(all_published($node, 'outage.t'),
	'published when the broker is back');

# --- a delivery timeout near INT_MAX does not overflow the deadline
reconfigure($node, "SET outbox.delivery_timeout = 2147483647");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('timeout.t', ('t' || i)::text) FROM generate_series(1, 10) i");
ok( wait_for_sql($node,
		"SELECT bool_and(status = 'published' AND attempts = 1) FROM outbox_messages WHERE topic = 'timeout.t'"),
	'published on the first attempt with delivery_timeout = INT_MAX ms');
reconfigure($node, "RESET outbox.delivery_timeout");

# --- publishing writes no row per event: the log is only inserted into,
# and is emptied by TRUNCATE, never by vacuum
$node->safe_psql('postgres', 'SELECT pg_stat_reset()');
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('stats.t', ('s' || i)::text) FROM generate_series(1, 1000) i");
ok( wait_for_sql($node,
		"SELECT count(*) = 1000 FROM outbox_messages WHERE topic = 'stats.t' AND status = 'published'"),
	'1000 events published');
ok( wait_for_sql($node,
		"SELECT sum(n_tup_ins) = 1000 AND sum(n_tup_upd + n_tup_del) = 0 FROM pg_stat_user_tables WHERE relname LIKE 'outbox\\_log\\__'",
		10),
	'the log tables were only inserted into');
is( $node->safe_psql('postgres',
		"SELECT n_tup_ins < 100 FROM pg_stat_user_tables WHERE relname = 'outbox_ledger'"),
	't', 'the deliveries are recorded per batch, not per event');
reconfigure($node, "SET outbox.published_retention = 0");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('vacuum.t', ('v' || i)::text) FROM generate_series(1, 5000) i");
ok( wait_for_sql($node,
		"SELECT NOT EXISTS (SELECT FROM outbox_log WHERE topic IN ('stats.t', 'vacuum.t'))",
		120),
	'with published_retention = 0 the log is emptied by TRUNCATE within a rotation');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_user_tables WHERE relname LIKE 'outbox\\_log%' AND (vacuum_count + autovacuum_count > 0 OR n_dead_tup > 0)"),
	'0', 'no vacuum ran on the log, and it holds no dead row');

# --- WAL is flushed to a position that always exists: a thousand one-event
# batches never fail with "xlog flush request ... is not satisfied"
reconfigure($node, "SET outbox.batch_size = 1");
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('wal.t', repeat('w', i % 97)) FROM generate_series(1, 1500) i");
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE topic = 'wal.t'", 120),
	'1500 single-event batches published');
unlike(slurp_file($node->logfile, $log_offset),
	qr/xlog flush request/, 'no batch failed to flush WAL');

$node->stop;
$broker->stop;
done_testing();
