
# Hostile roles against a server with the worker.  What any role of a
# database may do (own functions, operators and tables in public, take
# advisory locks, set its own settings, try to lock the log), what the
# owner of a database may do (own public and rename it, set the database's
# session defaults), what a superuser's own habits may do (hold a table
# lock, drop a database in a transaction block): none of it runs code as
# the worker, loses an event, stops publishing or restarts a worker.

use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker) = outbox_node_with_broker(
	'hostile',
	'outbox.poll_interval' => '100ms',
	'outbox.retry_base_delay' => '200ms',
	'outbox.retry_jitter' => '0',
	'max_worker_processes' => '16',
	'max_prepared_transactions' => '2');

# A session of its own, in the background, as $user, named $name (its
# application_name): its script runs until it ends (errors do not stop
# it) or stop_background($name) ends its backend.
my $scripts = 0;
sub background
{
	my ($db, $user, $name, $sql) = @_;
	my $file = "$PostgreSQL::Test::Utils::tmp_check/script" . $scripts++ . '.sql';
	append_to_file($file, $sql);
	return IPC::Run::start(
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-f', $file,
			'-d', $node->connstr($db) . " user=$user application_name=$name"
		],
		'<', '/dev/null', '>', "$file.out", '2>', "$file.err");
}

sub stop_background
{
	my ($h, $name) = @_;
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$name'");
	$h->finish;
	return;
}

# The pid of the worker of database $db once it is idle or publishing.
sub pid_of
{
	my ($db) = @_;
	wait_for_sql($node,
		"SELECT state IN ('idle', 'publishing') FROM outbox_worker_status() WHERE database = '$db'"
	);
	return $node->safe_psql('postgres',
		"SELECT pid FROM outbox_worker_status() WHERE database = '$db'");
}

# How many distinct payloads of $topic Kafka holds, and how many records.
sub distinct_records
{
	my ($topic) = @_;
	my $records = kafka_read($broker, $topic);
	my %seen = map { $_->{payload} => 1 } @$records;
	return (scalar keys %seen, scalar @$records);
}

# Wait until Kafka has $count distinct payloads of $topic; how many it has.
sub wait_for_distinct
{
	my ($topic, $count, $seconds) = @_;
	my $deadline = time + ($seconds // 60);
	my $distinct;
	while (1)
	{
		($distinct) = distinct_records($topic);
		last if $distinct >= $count || time > $deadline;
		usleep(250_000);
	}
	return $distinct;
}

# In database $db, role $planter (which may create in public) plants
# public.trojan(): run by another role, it tries to make $planter a
# superuser, and counts the run in a sequence, which no rollback takes
# back.
sub plant_trojan
{
	my ($db, $planter) = @_;
	$node->safe_psql(
		$db, qq{
		CREATE SEQUENCE public.${planter}_ran;
		GRANT USAGE ON SEQUENCE public.${planter}_ran TO PUBLIC;
		ALTER SEQUENCE public.${planter}_ran OWNER TO $planter;
		SET ROLE $planter;
		CREATE FUNCTION public.trojan() RETURNS void LANGUAGE plpgsql AS \$\$
		BEGIN
			IF current_user <> '$planter' THEN
				PERFORM pg_catalog.nextval('public.${planter}_ran');
			END IF;
			BEGIN
				ALTER ROLE $planter SUPERUSER;
			EXCEPTION WHEN insufficient_privilege THEN NULL;
			END;
		END \$\$;
		RESET ROLE;
	});
	return;
}

# In database $db, role $planter plants an = operator on outbox_status
# in public, which runs public.trojan(): a statement of the extension that
# compared statuses with an unqualified = would run it.
sub plant_status_operator
{
	my ($db, $planter) = @_;
	$node->safe_psql(
		$db, qq{
		SET ROLE $planter;
		CREATE FUNCTION public.status_eq(a outbox_status, b outbox_status) RETURNS boolean
		LANGUAGE plpgsql AS \$\$
		BEGIN
			PERFORM public.trojan();
			RETURN a::text OPERATOR(pg_catalog.=) b::text;
		END \$\$;
		CREATE OPERATOR public.= (LEFTARG = outbox_status, RIGHTARG = outbox_status,
								  FUNCTION = public.status_eq);
		RESET ROLE;
	});
	return;
}

# "ran" if the trojan of $planter ran as another role, or it became a
# superuser; "never" otherwise.
sub trojan_ran
{
	my ($db, $planter) = @_;
	return $node->safe_psql($db,
		"SELECT CASE WHEN (SELECT is_called FROM public.${planter}_ran) OR (SELECT rolsuper FROM pg_roles WHERE rolname = '$planter') THEN 'ran' ELSE 'never' END"
	);
}

# --- a role with CREATE on public plants, beside the extension's names,
# closer overloads (what an uncast call would pick), ambiguous ones with
# defaults (what would make a call "not unique") and an operator on its
# enum: the worker publishes beside them and runs none
$node->safe_psql('postgres',
	'CREATE ROLE mallory LOGIN; GRANT CREATE, USAGE ON SCHEMA public TO mallory');
plant_trojan('postgres', 'mallory');
plant_status_operator('postgres', 'mallory');
$node->safe_psql(
	'postgres', q{
	SET ROLE mallory;
	CREATE FUNCTION public.outbox_count_recorded(n integer) RETURNS void
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); END $$;
	CREATE FUNCTION public.outbox_lock_reader(wait boolean, x integer DEFAULT 0) RETURNS boolean
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN true; END $$;
	CREATE FUNCTION public.outbox_copy_to_retries(ids bigint[], x integer DEFAULT 0) RETURNS bigint
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN 0; END $$;
	CREATE FUNCTION public.outbox_log_rows(ids bigint[], x integer DEFAULT 0) RETURNS SETOF outbox_log
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); END $$;
	CREATE FUNCTION public.outbox_mark_logged(ids bigint[], partitions integer[], offsets bigint[],
		topics text[], created_at timestamptz[], keep boolean, x integer DEFAULT 0) RETURNS bigint
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN 0; END $$;
	CREATE FUNCTION public.outbox_count_published(topics text[], created_at timestamptz[],
		x integer DEFAULT 0) RETURNS bigint
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN 0; END $$;
	CREATE FUNCTION public.outbox_unread(id bigint, txid xid8, r outbox_reader, x integer DEFAULT 0)
	RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN true; END $$;
	CREATE FUNCTION public.outbox_in_progress(x integer DEFAULT 0) RETURNS xid8[]
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN '{}'; END $$;
	CREATE FUNCTION public.outbox_retry_delay(attempts integer, base_delay interval,
		max_delay interval, jitter double precision, x integer DEFAULT 0) RETURNS interval
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN '0'; END $$;
	CREATE FUNCTION public.outbox_dead_letter(ids bigint[], dead_letter_topic text,
		x integer DEFAULT 0) RETURNS bigint
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN 0; END $$;
	CREATE FUNCTION public.outbox_histogram_add(a bigint[], b bigint[], x integer DEFAULT 0)
	RETURNS bigint[] LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN a; END $$;
	CREATE FUNCTION public.outbox_latency_histogram(latencies_ms double precision[],
		x integer DEFAULT 0) RETURNS bigint[]
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN '{}'; END $$;
	RESET ROLE;
});
# refused requests, so that the retry table and its backoff are used too
$broker->command("produce_errors 3 $INVALID_TIMESTAMP");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('planted.t', 'p' || i, key => (i % 7)::text) FROM generate_series(1, 200) i");
is(wait_for_distinct('planted.t', 200, 60), 200,
	'the worker publishes beside planted overloads and an operator');
# (this test's own queries compare status as text: they run as a superuser
# with public on the search path, just what the worker must not do)
ok( wait_for_sql($node,
		"SELECT bool_and(status::text = 'published') FROM outbox_messages WHERE topic = 'planted.t'"),
	'and records every outcome');
$node->safe_psql('postgres', 'SELECT outbox_purge()');
is(trojan_ran('postgres', 'mallory'), 'never', 'none of them ran, and mallory is no superuser');

# --- the owner of a database owns public (pg_database_owner's): once
# given the database, she may not rename public (and put look-alikes in
# its place), but she owns the schema the extension's SQL names.  The
# worker waits and says why, runs nothing of hers, loses nothing, and
# publishes once public is a superuser's again.
$node->safe_psql('postgres', 'CREATE ROLE dbo LOGIN; CREATE DATABASE shop');
$node->safe_psql('shop', 'CREATE EXTENSION outbox');
my $shop_pid = pid_of('shop');
$node->safe_psql('shop',
	"SELECT outbox_enqueue('shop.t', 'before ' || i) FROM generate_series(1, 10) i");
is(wait_for_distinct('shop.t', 10, 20), 10, 'shop publishes');
$node->safe_psql('postgres', 'ALTER DATABASE shop OWNER TO dbo');
my (undef, undef, $rename_err) = $node->psql('shop',
	'SET ROLE dbo; ALTER SCHEMA public RENAME TO public_old');
like($rename_err, qr/cannot rename schema "public": it holds extension outbox/,
	'she may not rename the schema the extension\'s SQL names');
plant_trojan('shop', 'dbo');
$node->safe_psql(
	'shop', q{
	SET ROLE dbo;
	CREATE FUNCTION public.outbox_lock_reader(wait boolean, x integer DEFAULT 0) RETURNS boolean
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); RETURN true; END $$;
	CREATE FUNCTION public.outbox_claim(batch_size bigint) RETURNS TABLE (id bigint)
	LANGUAGE plpgsql AS $$ BEGIN PERFORM public.trojan(); END $$;
	RESET ROLE;
});
ok( wait_for_sql($node,
		"SELECT state = 'waiting for extension' AND last_error LIKE 'schema \"public\" of extension outbox is owned by role \"dbo\", which is neither the extension''s owner nor a superuser%' FROM outbox_worker_status() WHERE database = 'shop'",
		20),
	'the worker waits, and says the schema is in untrusted hands');
$node->safe_psql('shop',
	"SELECT public.outbox_enqueue('shop.t', 'during ' || i) FROM generate_series(1, 10) i");
sleep 2;
is((distinct_records('shop.t'))[0], 10, 'nothing is published meanwhile');
is( $node->safe_psql('shop',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND datname = 'shop' AND wait_event_type = 'Lock'"),
	'0', 'and the worker waits for no lock of hers');
# a superuser takes it back: the database's owner owns public no more
$node->safe_psql('shop', 'ALTER SCHEMA public OWNER TO postgres');
is(wait_for_distinct('shop.t', 20, 20), 20,
	'publishing resumes once the schema is a superuser\'s again, and no event is lost');
is(trojan_ran('shop', 'dbo'), 'never', 'the trojan never ran, and dbo is no superuser');

# --- session defaults a database owner (or a superuser) may set for the
# database, against the worker: it sets its own and publishes every
# committed event, none lost while the log rotates and is emptied
# (published_retention = 0: a table is emptied once its events are out)
reconfigure($node, 'SET outbox.published_retention = 0');
$node->safe_psql(
	'postgres', q{
	ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read';
	ALTER DATABASE postgres SET default_transaction_read_only = on;
	ALTER DATABASE postgres SET default_transaction_deferrable = on;
	ALTER DATABASE postgres SET statement_timeout = '1ms';
	ALTER DATABASE postgres SET lock_timeout = '1ms';
	ALTER DATABASE postgres SET idle_in_transaction_session_timeout = '1ms';
	ALTER DATABASE postgres SET session_replication_role = replica;
	ALTER DATABASE postgres SET search_path = public;
	ALTER DATABASE postgres SET transform_null_equals = on;
	ALTER DATABASE postgres SET work_mem = '64kB';
});
{
	# this test's own sessions take what they need back; the application
	# below runs in REPEATABLE READ
	local $ENV{PGOPTIONS} =
	  '-c default_transaction_read_only=off -c statement_timeout=0 -c lock_timeout=0 '
	  . '-c idle_in_transaction_session_timeout=0 -c session_replication_role=origin';
	my $old_pid = pid_of('postgres');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($old_pid)");
	ok( wait_for_sql($node,
			"SELECT pid <> $old_pid AND state = 'idle' FROM outbox_worker_status() WHERE database = 'postgres'"
		),
		'a worker starts with the database\'s hostile defaults');
	my $first_log = $node->safe_psql('postgres', 'SELECT current_log FROM outbox_reader');

	# commits of 20 events, in REPEATABLE READ, at least 250 of them and
	# until enqueue has written to three log tables (it moves on every
	# 10 s with a retention of 0)
	my $start = time;
	my %tables = ($first_log => 1);
	my $n = 0;
	while ($n < 250 || (keys %tables < 3 && time - $start < 90))
	{
		$node->safe_psql('postgres',
			"SELECT count(outbox_enqueue('rr.t', ($n * 20 + i)::text, key => (i % 5)::text)) FROM generate_series(1, 20) i"
		);
		$tables{ $node->safe_psql('postgres', 'SELECT current_log FROM outbox_reader') } = 1
		  if $n % 5 == 0;
		$n++;
		usleep(60_000);
	}
	diag(sprintf('%d events committed in %.1f s, enqueue wrote to %d log tables',
			$n * 20, time - $start, scalar keys %tables));
	ok(scalar keys %tables >= 3, 'the log rotated while events flowed');
	is(wait_for_distinct('rr.t', $n * 20, 60), $n * 20, 'every committed event is published');
	ok( wait_for_sql($node, 'SELECT count(*) = 0 FROM outbox_log', 60),
		'and the log is emptied');
	is( $node->safe_psql('postgres',
			"SELECT state || ' ' || coalesce(last_error, '') FROM outbox_worker_status() WHERE database = 'postgres'"),
		'idle ', 'the worker never failed a batch');
	$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET ALL');
}

# --- a lock that a role with no right on the log tries to take, and
# keeps, in a transaction left open: the log is emptied all the same
$node->safe_psql('postgres',
	'CREATE ROLE stranger LOGIN; GRANT CREATE ON SCHEMA public TO stranger');
my $stranger = background(
	'postgres', 'stranger', 'stranger', q{
	\set ON_ERROR_ROLLBACK on
	CREATE TABLE stranger_rows (id int);
	BEGIN;
	PREPARE p0 AS SELECT FROM outbox_log_0;
	PREPARE p1 AS SELECT FROM outbox_log_1;
	DECLARE c2 CURSOR FOR SELECT FROM outbox_log_2;
	CREATE VIEW v3 AS SELECT FROM outbox_log_3;
	CREATE FUNCTION f() RETURNS bigint LANGUAGE sql BEGIN ATOMIC
		SELECT count(*) FROM outbox_log_0 UNION ALL SELECT count(*) FROM outbox_log_1
		UNION ALL SELECT count(*) FROM outbox_log_2 UNION ALL SELECT count(*) FROM outbox_log_3; END;
	CREATE RULE r AS ON INSERT TO stranger_rows DO ALSO SELECT FROM outbox_log_2;
	SELECT pg_sleep(90);
});
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE usename = 'stranger' AND query LIKE 'SELECT pg_sleep%'"),
	'a role with no right on the log sits in an open transaction');
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('stranger.t', i::text) FROM generate_series(1, 500) i");
is(wait_for_distinct('stranger.t', 500, 30), 500, 'its events are published');
# enqueue moves on at the next cleanup, which empties the tables after
$node->safe_psql('postgres',
	"UPDATE outbox_reader SET current_since = now() - interval '1 hour'");
ok(wait_for_sql($node, 'SELECT count(*) = 0 FROM outbox_log', 45),
	'and every log table is emptied');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'stranger' AND state = 'active'"),
	'1', 'while the stranger\'s transaction is still open');
stop_background($stranger, 'stranger');
reconfigure($node, 'RESET outbox.published_retention');

# --- the claim's lock is no advisory lock that any role can take
$node->safe_psql('postgres', 'CREATE ROLE locker LOGIN');
my $locker = background('postgres', 'locker', 'locker',
	"SELECT pg_advisory_lock(hashtext('outbox_claim'), 'outbox_reader'::regclass::oid::integer); SELECT pg_sleep(60);"
);
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND a.usename = 'locker' AND l.granted"
	),
	'another role holds the advisory lock of the claim of 1.1');
my $start = time;
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('advisory.t', i::text) FROM generate_series(1, 1000) i");
is(wait_for_distinct('advisory.t', 1000, 15), 1000, 'publishing goes on: 1000 events within 15 s');
stop_background($locker, 'locker');

# --- a role with no right on the extension tries to drop it while a
# transaction of hers holds what pg_get_viewdef locks (a pg_dump writing to
# a slow pipe holds as much): refused at once, and the worker never queues
# behind her.  (The lock_timeout only ends the test if she waits.)
my $holder = background('postgres', 'locker', 'holder',
	"BEGIN; SELECT pg_get_viewdef('outbox_messages'::regclass); SELECT pg_sleep(90);");
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'holder' AND query LIKE 'SELECT pg_sleep%'"),
	'a role with no right holds a transaction open on the view of the events');
my $drop_err = "$PostgreSQL::Test::Utils::tmp_check/script$scripts.sql.err";
my $dropper = background('postgres', 'locker', 'dropper',
	"SET lock_timeout = '60s'; DROP EXTENSION outbox; DROP SCHEMA public CASCADE; DROP OWNED BY postgres;");
$node->safe_psql('postgres',
	"SELECT outbox_enqueue('dropper.t', i::text) FROM generate_series(1, 100) i");
is(wait_for_distinct('dropper.t', 100, 30), 100, 'while she drops the extension, publishing goes on');
$dropper->finish;
is( join("\n", map { /ERROR:  (.*)/ ? $1 : () } split /\n/, slurp_file($drop_err)),
	"must be owner of extension outbox\nmust be owner of schema public\npermission denied to drop objects",
	'and DROP EXTENSION, DROP SCHEMA and DROP OWNED BY are refused for want of rights');
stop_background($holder, 'holder');

# --- a role with no right on the extension makes a temporary view on one
# of its functions, which would hold an update back: the query of
# docs/operations.md finds it, and a superuser drops it by that name
my $viewer = background('postgres', 'locker', 'temp_viewer',
	"CREATE TEMP VIEW v AS SELECT outbox_histogram_quantile('{1}'::bigint[], 0.5::float8) AS q; SELECT pg_sleep(90);");
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_class WHERE relname = 'v' AND relpersistence = 't' AND relowner = 'locker'::regrole"),
	'a role with no right has a temporary view on a function of the extension');
my ($dependents_sql) = grep { /dependent_view/ }
  slurp_file(dirname(__FILE__) . '/../docs/operations.md') =~ /^```sql\n(.*?)^```/msg;
my $dependents = $node->safe_psql('postgres', $dependents_sql);
like($dependents, qr/^(pg_temp_\d+)\.v\|function outbox_histogram_quantile\(.*\)$/,
	'the query of the upgrade section of docs/operations.md lists it');
my ($temp_schema) = $dependents =~ /^(pg_temp_\d+)/;
$node->safe_psql('postgres', "DROP VIEW $temp_schema.v");
is($node->safe_psql('postgres', $dependents_sql), '', 'dropped by that name, it is gone');
stop_background($viewer, 'temp_viewer');

# a superuser's table lock: the worker waits for it, and SIGTERM ends it
my $pid = pid_of('postgres');
$locker = background('postgres', 'postgres', 'table_locker',
	'BEGIN; LOCK TABLE outbox_reader IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60);');
$node->safe_psql('postgres', "SELECT outbox_enqueue('blocked.t', 'x'::text)");
ok( wait_for_sql($node,
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"),
	'the worker waits for a table lock');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid", 3),
	'pg_terminate_backend ends it at once');
stop_background($locker, 'table_locker');
is(wait_for_distinct('blocked.t', 1, 20), 1, 'its successor publishes once the lock is gone');

# a superuser's INSERT into the log by hand, rolled back, in a session she
# leaves open: it restored nothing, and the worker does not wait for it
my $by_hand = $node->background_psql('postgres');
$by_hand->query_safe('BEGIN');
$by_hand->query_safe('INSERT INTO outbox_log_0 SELECT * FROM outbox_log_0 WHERE false');
ok( wait_for_sql($node,
		"SELECT state = 'waiting for restore' FROM outbox_worker_status() WHERE database = 'postgres'"),
	'while a transaction writes the log by hand, the worker waits for the restore');
$by_hand->query_safe('ROLLBACK');
$node->safe_psql('postgres', "SELECT outbox_enqueue('by_hand.t', 'x'::text)");
is(wait_for_distinct('by_hand.t', 1, 30), 1,
	'once it rolls back, the worker publishes, its session still open');
isnt( $node->safe_psql('postgres',
		"SELECT state FROM outbox_worker_status() WHERE database = 'postgres'"),
	'waiting for restore', 'and no longer waits for a restore');
$by_hand->quit;

# --- any role may ALTER ROLE itself and run CREATE EXTENSION IF NOT
# EXISTS; a refused ALTER ROLE counts for nothing: no worker restarts, and
# a drain is not slowed
sub drain
{
	my ($topic) = @_;
	my $start = time;
	$node->safe_psql('postgres',
		"SELECT count(outbox_enqueue('$topic', i::text, key => (i % 100)::text)) FROM generate_series(1, 20000) i"
	);
	while (time < $start + 120)
	{
		last if $node->safe_psql('postgres',
			"SELECT pending FROM outbox_stats WHERE topic IS NULL") eq '0';
		usleep(100_000);
	}
	return time - $start;
}
$pid = pid_of('postgres');
my $quiet = drain('drain.quiet');
$node->safe_psql('postgres', 'CREATE ROLE chatty LOGIN');
my $chatty = background('postgres', 'chatty', 'chatty',
	join('',
		map {
			"ALTER ROLE CURRENT_USER SET outbox.headers = '{\"n\": \"$_\"}'; "
			  . "CREATE EXTENSION IF NOT EXISTS outbox; "
			  . "ALTER ROLE postgres SET outbox.brokers = 'elsewhere:9092'; "
			  . "SELECT pg_sleep(0.1);\n"
		} 1 .. 100));
my $noisy = drain('drain.noisy');
stop_background($chatty, 'chatty');
diag(sprintf('20000 events drained in %.2f s alone, %.2f s beside a role that alters itself',
		$quiet, $noisy));
is(pid_of('postgres'), $pid, 'no worker restarted');
# (two drains of a loaded machine: what is guarded is a worker that
# reloads or restarts at each ALTER ROLE, many times slower)
ok($noisy < 3 * $quiet + 5, 'the drain is not slowed');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_db_role_setting WHERE setrole = 'postgres'::regrole"),
	'0', 'the refused ALTER ROLE changed nothing');
# a change rolled back restarts nothing; one that commits does
$node->safe_psql('postgres',
	'BEGIN; ALTER DATABASE postgres SET outbox.batch_size = 500; ROLLBACK');
sleep 2;
is(pid_of('postgres'), $pid, 'a setting rolled back restarts nothing');
$node->safe_psql('postgres', 'ALTER DATABASE postgres SET outbox.batch_size = 500');
ok( wait_for_sql($node,
		"SELECT pid <> $pid FROM outbox_worker_status() WHERE database = 'postgres' AND state = 'idle'"
	),
	'one committed restarts the worker');
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET outbox.batch_size');

# --- a long key on a topic the cluster refuses: its event fails, once per
# attempt, and the rest of its batch is published once (a short delivery
# timeout: what a refused topic could hold its batch for)
reconfigure($node, 'SET outbox.delivery_timeout = 2000');
$broker->command("topic_error denied.t $TOPIC_AUTHORIZATION_FAILED");
my $log_offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_enqueue('denied.t', 'long'::text,
		key => (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 188) i));
	SELECT outbox_enqueue('beside.t', i::text, key => (i % 3)::text) FROM generate_series(1, 20) i;
	COMMIT;
});
ok( wait_for_sql($node,
		"SELECT status = 'failed' AND last_error = 'Broker: Topic authorization failed' FROM outbox_messages WHERE topic = 'denied.t'",
		20),
	'the event of the 6,000-byte key is recorded as failed');
sleep 5;
is_deeply([ distinct_records('beside.t') ], [ 20, 20 ],
	'the 20 events of its batch are published, each once');
unlike(slurp_file($node->logfile, $log_offset), qr/index row size|publishing batch failed/,
	'no batch failed');
$broker->command("topic_error denied.t 0");
reconfigure($node, 'RESET outbox.delivery_timeout');

# --- another database's last_error is shown to superusers and pg_monitor
# only: db2's owner cannot log in, which its status says
$node->safe_psql('postgres',
	'CREATE DATABASE db2; CREATE ROLE db2_owner SUPERUSER NOLOGIN; '
	  . 'CREATE ROLE viewer LOGIN; CREATE ROLE watcher LOGIN IN ROLE pg_monitor; '
	  . 'GRANT EXECUTE ON FUNCTION outbox_worker_status() TO viewer, watcher');
$node->safe_psql('db2', 'SET ROLE db2_owner; CREATE EXTENSION outbox');
ok( wait_for_sql($node,
		"SELECT last_error LIKE 'role \"db2_owner\", which owns the extension, cannot log in%' FROM outbox_worker_status() WHERE database = 'db2'"
	),
	'db2\'s worker waits, and its status says why');
is( $node->safe_psql('postgres',
		"SELECT state || ' ' || coalesce(last_error, 'hidden') FROM outbox_worker_status() WHERE database = 'db2'",
		extra_params => [ '-U', 'viewer' ]),
	'waiting for extension hidden',
	'a role of another database sees its state, not its error');
like( $node->safe_psql('postgres',
		"SELECT last_error FROM outbox_worker_status() WHERE database = 'db2'",
		extra_params => [ '-U', 'watcher' ]),
	qr/db2_owner/, 'a member of pg_monitor sees it');
# no worker has looked at db2, whose extension was created while the
# server ran: it holds only what commits since may have added, which DROP
# DATABASE asks to be discarded first
$node->safe_psql('db2', "SELECT outbox_enqueue('db2.t', 'x'::text)");
my ($dropret, $dropout, $droperr) = $node->psql('postgres', 'DROP DATABASE db2');
like(
	$droperr,
	qr/ERROR:  database "db2" may hold events of extension outbox that are not delivered\nDETAIL:  A transaction there may have added some \(an enqueue, a restore, a retry, a snapshot\) since its worker last looked, or since the extension was created\./,
	'DROP DATABASE of a database no worker could look at, with an event enqueued, is refused, saying why');
$node->safe_psql('db2', 'SELECT outbox_discard()');
$node->safe_psql('postgres', 'DROP DATABASE db2');

# --- a refused DROP DATABASE leaves the worker alone: the owner's, in a
# transaction block
$node->safe_psql('postgres', 'ALTER DATABASE shop OWNER TO dbo');
$shop_pid = pid_of('shop');
my ($ret, $out, $err) = $node->psql('postgres', 'BEGIN; DROP DATABASE shop; ROLLBACK;',
	extra_params => [ '-U', 'dbo' ]);
like($err, qr/DROP DATABASE cannot run inside a transaction block/, 'DROP DATABASE in a transaction block is refused');
sleep 2;
is(pid_of('shop'), $shop_pid, 'and the database\'s worker is the same');
# one that fails after its worker left (a prepared transaction is in the
# database, and DROP DATABASE waits 5 s for it): served again at once
$node->safe_psql('shop',
	"BEGIN; SELECT public.outbox_enqueue('shop.t', 'prepared'::text); PREPARE TRANSACTION 'held'");
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE shop', extra_params => [ '-U', 'dbo' ]);
like($err, qr/database "shop" is being accessed by other users/, 'a DROP DATABASE that fails');
my $failed_at = time;
ok( wait_for_sql($node,
		"SELECT pid <> $shop_pid AND state = 'idle' FROM outbox_worker_status() WHERE database = 'shop'", 10),
	'its database is served again');
# (not after the 10 s a DROP DATABASE that may succeed holds its worker back)
ok(time - $failed_at < 8, 'at once');
$node->safe_psql('shop', "COMMIT PREPARED 'held'");
is(wait_for_distinct('shop.t', 21, 20), 21, 'and publishes');

# --- two owners drop two served databases at once: both succeed
$node->safe_psql('postgres', 'CREATE ROLE dbo2 LOGIN; CREATE DATABASE shop2 OWNER dbo2');
$node->safe_psql('shop2', 'ALTER SCHEMA public OWNER TO postgres; CREATE EXTENSION outbox');
pid_of('shop2');
pid_of('shop');
my @drops = map {
	my ($db, $owner) = @$_;
	my ($o, $e) = ('', '');
	[
		IPC::Run::start(
			[ 'psql', '-X', '-d', $node->connstr('postgres') . " user=$owner", '-c', "DROP DATABASE $db" ],
			'<', '/dev/null', '>', \$o, '2>', \$e),
		\$e
	]
} ([ 'shop', 'dbo' ], [ 'shop2', 'dbo2' ]);
my @results = map { $_->[0]->finish; ${ $_->[1] } } @drops;
is_deeply(\@results, [ '', '' ], 'two owners dropping their served databases at once both succeed');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_database WHERE datname IN ('shop', 'shop2')"),
	'0', 'both are gone');

# --- outbox.databases names databases as identifiers: Sales unquoted is
# sales, and the log names the database that differs only by case
$node->safe_psql('postgres', 'CREATE DATABASE "Sales"');
$node->safe_psql('Sales', 'CREATE EXTENSION outbox');
$log_offset = -s $node->logfile;
reconfigure($node, "SET outbox.databases = 'Sales'");
ok( wait_for_sql($node,
		"SELECT state = 'waiting for database' AND last_error = 'database \"sales\" does not exist' FROM outbox_worker_status() WHERE database = 'sales'"
	),
	'Sales unquoted: the status waits for database sales');
like(slurp_file($node->logfile, $log_offset),
	qr/database "sales" named in outbox.databases does not exist.*\n.*HINT:  A database "Sales" exists/,
	'and the log names the database "Sales"');
reconfigure($node, q{SET outbox.databases = '"Sales"'});
$node->safe_psql('Sales', "SELECT outbox_enqueue('sales.t', 'x'::text)");
is(wait_for_distinct('sales.t', 1, 20), 1, 'quoted, "Sales" is served');
reconfigure($node, 'RESET outbox.databases');
$node->safe_psql('postgres', 'DROP DATABASE "Sales" WITH (FORCE)');

# --- the extension in template1: a database made from it by a role that
# is no superuser has it, in a public schema that role owns.  Its worker
# waits, says the schema is not trusted, and runs nothing of hers.
$node->safe_psql('template1', 'CREATE EXTENSION outbox');
$node->safe_psql('postgres', 'CREATE ROLE maker LOGIN CREATEDB');
$node->psql('postgres', 'CREATE DATABASE made', extra_params => [ '-U', 'maker' ]);
plant_trojan('made', 'maker');
plant_status_operator('made', 'maker');
$node->safe_psql('made', "SELECT outbox_enqueue('made.t', 'x'::text)");
ok( wait_for_sql($node,
		"SELECT state = 'waiting for extension' AND last_error LIKE 'schema \"public\" of extension outbox is owned by role \"maker\"%' FROM outbox_worker_status() WHERE database = 'made'"
	),
	'the worker of a database made from template1 by a plain role waits: its schema is not trusted');
sleep 2;
is((distinct_records('made.t'))[0], 0, 'it publishes nothing');
is(trojan_ran('made', 'maker'), 'never', 'and runs nothing of the database owner\'s');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM outbox_worker_status() WHERE database = 'template1'"),
	'0', 'template1 itself is not served');
$node->safe_psql('template1', 'DROP EXTENSION outbox');

$node->stop;
$broker->stop;
done_testing();
