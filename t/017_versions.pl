
# Versions.  A database whose extension is at an earlier version, created
# with this library, never crashes the server, whatever is called: at 1.1
# (the version before this one) every function of its script, its views
# and a captured INSERT work; at 1.0 every C function refuses with 55000
# and a HINT to update, and what 1.0 runs in SQL either works or refuses
# the same way.  Then a rolling update under load: while pgbench enqueues
# and inserts into a captured table, ALTER EXTENSION outbox UPDATE takes a
# database from 1.1 to 1.4: no transaction fails, every committed event is
# published once, in the order of its key.  Last, a fresh install and the
# chain from 1.0 have the same schema, as pg_dump sees it: at 1.3 (the base
# script outbox--1.3.sql alone) and at 1.4 (outbox--1.3.sql, then
# outbox--1.3--1.4.sql).

use strict;
use warnings;

use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my ($node, $broker) =
  outbox_node_with_broker('versions', 'outbox.poll_interval' => '100ms');
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# Run $sql in $db; (SQLSTATE or '' on success, output, error text).
sub run_sql
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql");
	return ('', $out, $err) if $ret == 0;
	my ($state) = $err =~ /(?:ERROR|FATAL|PANIC):  ([0-9A-Z]{5}):/;
	return ($state // "psql exit $ret", $out, $err);
}

# The functions of the extension in $db, as regprocedure text.
sub functions
{
	my ($db) = @_;
	return [
		split /\n/,
		$node->safe_psql(
			$db, q{
		SELECT p.oid::regprocedure::text
		  FROM pg_proc p
		  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'outbox'
		 ORDER BY 1})
	];
}

# the C functions of the extension in $db
sub c_functions
{
	my ($db) = @_;
	return {
		map { $_ => 1 } split /\n/,
		$node->safe_psql(
			$db, q{
		SELECT p.oid::regprocedure::text
		  FROM pg_proc p
		  JOIN pg_language l ON l.oid = p.prolang AND l.lanname = 'c'
		  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'outbox'})
	};
}

my $not_served =
  qr/ERROR:  55000: extension outbox is at version 1\.0, which this library no longer serves\nHINT:  Update it with ALTER EXTENSION outbox UPDATE\./;

# --- 1.0: every C function refuses, cleanly; nothing else goes wrong
#
# Each call: the functions it calls (beside what SQL functions call), its
# SQL, and what it gives: '55000' for the refusal, else its output.
my @calls_1_0 = (
	[ ['outbox_enqueue(text,jsonb,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '{"n": 1}'::jsonb, key => 'k1', headers => '{"h": "1"}')},
		'55000' ],
	[ ['outbox_enqueue(text,text,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '2'::text, key => 'k1', event_id => gen_random_uuid())},
		'55000' ],
	[ ['outbox_enqueue(text,bytea,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '\x33'::bytea, key => 'k2')}, '55000' ],
	[ ['outbox_attach(regclass,text,text[])'],
		q{SELECT outbox_attach('orders', 'v.orders')}, '55000' ],
	# the trigger outbox_attach would have made, made by hand
	[ ['outbox_capture()'], q{
		CREATE TRIGGER outbox_capture AFTER INSERT OR UPDATE OR DELETE ON orders
			FOR EACH ROW EXECUTE FUNCTION outbox_capture('v.orders');
		INSERT INTO orders VALUES (1, 'a')}, '55000' ],
	[ ['outbox_detach(regclass)'],
		q{SELECT outbox_detach('orders'); SELECT count(*) FROM pg_trigger WHERE tgrelid = 'orders'::regclass},
		"\n0" ],
	[ ['outbox_worker_status()'], q{SELECT count(*) FROM outbox_worker_status()}, '55000' ],
	[ ['outbox_latency_histogram(double precision[])'],
		q{SELECT outbox_latency_histogram('{1,2,3}')}, '55000' ],
	[ ['outbox_histogram_add(bigint[],bigint[])'],
		q{SELECT outbox_histogram_add('{1}', '{2}')}, '55000' ],
	[ ['outbox_histogram_sum(bigint[])'],
		q{SELECT outbox_histogram_sum(h) FROM (VALUES ('{1}'::bigint[])) v(h)}, '55000' ],
	[ ['outbox_histogram_quantile(bigint[],double precision)'],
		q{SELECT outbox_histogram_quantile('{1,2}', 0.5)}, '0.4' ],
	[ ['outbox_retry_delay(integer,interval,interval,double precision)'],
		q{SELECT outbox_retry_delay(3, '1s', '1min', 0)}, '00:00:04' ],
	# the state machine, which 1.0 ran in SQL: what calls no C works
	[ [ 'outbox_claim(integer)', 'outbox_mark_failed(bigint[],text[],boolean[],integer,interval,interval,double precision,text)' ],
		q{
		BEGIN;
		SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox_claim(2);
		SELECT outbox_mark_failed('{2}', '{"Broker: Not enough in-sync replicas"}', '{f}', 10, '1h', '1h', 0, NULL);
		COMMIT}, "1,2\n1" ],
	# what records statistics computes a histogram in C
	[ ['outbox_mark_published(bigint[],integer[],bigint[],boolean)'],
		q{
		BEGIN;
		SELECT count(*) FROM outbox_claim(1);
		SELECT outbox_mark_published('{1}', '{0}', '{10}', true);
		COMMIT}, '55000' ],
	[ ['outbox_retry(bigint)'], q{SELECT outbox_retry(2)}, '1' ],
	[ ['outbox_abandon(bigint)'], q{SELECT outbox_abandon(2)}, '1' ],
	[ ['outbox_retry_abandoned(text)'], q{SELECT outbox_retry_abandoned('v.t')}, '1' ],
	[ ['outbox_dead_letter(bigint[],text)'],
		q{SELECT outbox_abandon(2); SELECT outbox_dead_letter('{2}', 'v.dlq')}, "1\n1" ],
	[ ['outbox_purge_batch(interval,interval,integer)'],
		q{SELECT outbox_purge_batch('7 days', '30 days', 100)}, '0' ],
	[ ['outbox_purge()'], q{SELECT outbox_purge()}, '0' ],
	# the views: outbox_stats sums the statistics' histograms in C
	[ [], q{SELECT count(*) FROM outbox_stats}, '55000' ],
	[ [], q{SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM outbox_messages WHERE topic <> 'v.dlq'},
		'1:pending,2:abandoned,3:pending,4:pending,5:pending' ]);

# --- 1.1: every function works, the library serving the version as it is
my @calls_1_1 = (
	[ ['outbox_enqueue(text,jsonb,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '{"n": 1}'::jsonb, key => 'k1', headers => '{"h": "1"}')},
		'1' ],
	[ ['outbox_enqueue(text,text,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '2'::text, key => 'k1', event_id => gen_random_uuid())},
		'2' ],
	[ ['outbox_enqueue(text,bytea,text,jsonb,uuid)'],
		q{SELECT outbox_enqueue('v.t', '\x33'::bytea, key => 'k2')}, '3' ],
	[ [ 'outbox_attach(regclass,text,text[])', 'outbox_capture()' ],
		q{
		SELECT outbox_attach('orders', 'v.orders');
		INSERT INTO orders VALUES (1, 'a');
		UPDATE orders SET v = 'b' WHERE id = 1;
		SELECT string_agg(key || ':' || (convert_from(payload, 'UTF8')::jsonb ->> 'op'), ',' ORDER BY id)
		  FROM outbox_messages WHERE topic = 'v.orders'}, "\n1:c,1:u" ],
	[ ['outbox_worker_status()'],
		q{SELECT count(*) > 0 FROM outbox_worker_status() WHERE database = 'postgres'}, 't' ],
	[ ['outbox_latency_histogram(double precision[])'],
		q|SELECT outbox_latency_histogram('{1,2,3}')::text LIKE '{0,0,0,0,1,0,1,0,1,0,%'|, 't' ],
	[ ['outbox_histogram_add(bigint[],bigint[])'],
		q{SELECT outbox_histogram_add('{1}', '{2}')}, '{3}' ],
	[ ['outbox_histogram_sum(bigint[])'],
		q{SELECT outbox_histogram_sum(h) FROM (VALUES ('{1,1}'::bigint[]), ('{2}')) v(h)}, '{3,1}' ],
	[ ['outbox_histogram_quantile(bigint[],double precision)'],
		q{SELECT outbox_histogram_quantile('{1,2}', 0.5)}, '0.4' ],
	[ ['outbox_retry_delay(integer,interval,interval,double precision)'],
		q{SELECT outbox_retry_delay(3, '1s', '1min', 0)}, '00:00:04' ],
	# what the monitoring reads
	[ [], q{SELECT pending, failed FROM outbox_stats WHERE topic IS NULL}, '5|0' ],
	[ ['outbox_in_progress()'], q{SELECT pg_typeof(outbox_in_progress())}, 'xid8[]' ],
	[ ['outbox_log_rows(bigint[])'],
		q{SELECT string_agg(id || ':' || topic, ',' ORDER BY id) FROM outbox_log_rows('{3,1,2}')},
		'1:v.t,2:v.t,3:v.t' ],
	[ ['outbox_unread_events(outbox_reader)'],
		q{SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox_unread_events((SELECT r FROM outbox_reader r))},
		'1,2,3,4,5' ],
	[ ['outbox_unread(bigint,xid8,outbox_reader)'],
		q{SELECT outbox_unread(l.id, l.txid, r) FROM outbox_log l, outbox_reader r WHERE l.id = 1},
		't' ],
	# the state machine by hand: claim, record
	[ [ 'outbox_lock_reader(boolean)', 'outbox_claim(integer,bigint)',
		'outbox_mark_published(bigint[],integer[],bigint[],boolean)',
		'outbox_mark_failed(bigint[],text[],boolean[],integer,interval,interval,double precision,text)' ],
		q{
		BEGIN;
		SELECT outbox_lock_reader(true);
		SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox_claim(2);
		SELECT outbox_mark_published('{1}', '{0}', '{10}', true);
		SELECT outbox_mark_failed('{2}', '{"Broker: Not enough in-sync replicas"}', '{f}', 10, '1h', '1h', 0, NULL);
		COMMIT}, "t\n1,2\n1\n1" ],
	[ ['outbox_mark_released(bigint[])'],
		q{
		BEGIN;
		SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox_claim(10);
		SELECT outbox_mark_released('{3,4,5}');
		COMMIT}, "3,4,5\n3" ],
	# the commit check of 1.1: a claimed event of the log left unrecorded
	[ ['outbox_check_recorded()'],
		q{
		SELECT outbox_enqueue('v.t', '6'::text, key => 'k3');
		BEGIN;
		SELECT count(*) FROM outbox_claim(10);
		COMMIT}, qr/ERROR:  55000: events claimed by outbox_claim\(\) were not recorded/ ],
	# what 1.1's recording is made of, undone
	[ [ 'outbox_copy_to_retries(bigint[])', 'outbox_count_recorded(bigint)',
		'outbox_count_published(text[],timestamp with time zone[])',
		'outbox_mark_logged(bigint[],integer[],bigint[],text[],timestamp with time zone[],boolean)' ],
		q{
		BEGIN;
		SELECT outbox_copy_to_retries('{6}');
		SELECT outbox_count_recorded(0);
		SELECT outbox_count_published('{v.t}', ARRAY[now()]);
		SELECT outbox_mark_logged('{6}', '{0}', '{11}', '{v.t}', ARRAY[now()], true);
		ROLLBACK}, "1\n\n1\n1" ],
	[ ['outbox_retry(bigint)'], q{SELECT outbox_retry(2)}, '1' ],
	[ ['outbox_abandon(bigint)'], q{SELECT outbox_abandon(2)}, '1' ],
	[ ['outbox_retry_abandoned(text)'], q{SELECT outbox_retry_abandoned('v.t')}, '1' ],
	[ ['outbox_dead_letter(bigint[],text)'],
		q{SELECT outbox_abandon(2); SELECT outbox_dead_letter('{2}', 'v.dlq')}, "1\n1" ],
	[ ['outbox_purge_batch(interval,interval,integer)'],
		q{SELECT outbox_purge_batch('7 days', '30 days', 100)}, '0' ],
	[ ['outbox_purge()'], q{SELECT outbox_purge()}, '0' ],
	[ ['outbox_rotate(interval)'], q{SELECT outbox_rotate('7 days')}, '0' ],
	[ ['outbox_detach(regclass)'],
		q{SELECT outbox_detach('orders'); SELECT count(*) FROM pg_trigger WHERE tgrelid = 'orders'::regclass},
		"\n0" ],
	[ [], q{SELECT string_agg(id || ':' || status || ':' || attempts, ',' ORDER BY id) FROM outbox_messages WHERE topic <> 'v.dlq'},
		'1:published:1,2:abandoned:0,3:pending:0,4:pending:0,5:pending:0,6:pending:0' ]);

for my $case ([ '1.0', \@calls_1_0 ], [ '1.1', \@calls_1_1 ])
{
	my ($version, $calls) = @$case;
	(my $db = "v$version") =~ s/\.//;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	# the calls drive the state machine by hand: the worker stays off
	$node->safe_psql('postgres', "ALTER DATABASE $db SET outbox.enabled = off");
	$node->safe_psql($db, "CREATE EXTENSION outbox VERSION '$version'");
	$node->safe_psql($db, 'CREATE TABLE orders (id int PRIMARY KEY, v text)');
	if ($version eq '1.0')
	{
		# rows written by hand, and a row of statistics for the view
		$node->safe_psql(
			$db, q{
			INSERT INTO outbox_messages (topic, key, payload)
				SELECT 'v.t', 'k' || i, convert_to('e' || i, 'UTF8') FROM generate_series(1, 5) i;
			INSERT INTO outbox_publish_stats (topic, bucket, published, latency_histogram)
				VALUES ('v.t', now(), 1, '{1}');
		});
	}

	my %c_function = %{ c_functions($db) };
	my %called;
	for my $call (@$calls)
	{
		my ($functions, $sql, $expected) = @$call;
		my $name = @$functions ? join(', ', @$functions) : $sql =~ s/\s+/ /gr;
		my ($state, $out, $err) = run_sql($db, $sql);
		$called{$_} = 1 for @$functions;
		if (ref $expected)
		{
			like($err, $expected, "$version: $name: refused as it should");
		}
		elsif ($expected eq '55000')
		{
			is($state, '55000', "$version: $name: refused with 55000") or diag($err);
			like($err, $not_served, "$version: $name: saying to update");
		}
		else
		{
			is($state, '', "$version: $name: works") or diag($err);
			is($out, $expected, "$version: $name: gives what it should");
		}
		if ($version eq '1.0')
		{
			ok($expected eq '55000' || !grep { $c_function{$_} } @$functions,
				"$version: $name: every C function refuses");
		}
	}
	is_deeply([ sort keys %called ], functions($db),
		"$version: every function of the version was called");
}

is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$started, 'no call crashed the server: it never restarted');
unlike(slurp_file($node->logfile), qr/terminated by signal/,
	'and no process was terminated by a signal');

# --- a rolling update under load: 1.1 -> 1.2 while pgbench runs
$node->safe_psql('postgres', 'CREATE DATABASE roll');
$node->safe_psql(
	'roll', q{
	CREATE EXTENSION outbox VERSION '1.1';
	CREATE SEQUENCE roll_seq;
	CREATE TABLE roll_orders (id bigserial PRIMARY KEY, k int NOT NULL, n bigint NOT NULL);
	SELECT outbox_attach('roll_orders', 'roll.orders', '{k}');
});
ok( wait_for_sql(
		$node,
		"SELECT state IN ('idle', 'publishing') FROM outbox_worker_status() WHERE database = 'roll'"),
	'the worker serves the database at 1.1');

# 1.1's functions take an advisory lock that any role can take too: one
# with no right on the extension holds it, and publishing goes on
$node->safe_psql('postgres', 'CREATE ROLE locker LOGIN');
my $locker = IPC::Run::start(
	[
		'psql', '-X', '-q', '-d', $node->connstr('roll') . ' user=locker', '-c',
		"SELECT pg_advisory_lock(hashtext('outbox_claim'), 'outbox_reader'::regclass::oid::integer), pg_sleep(120)"
	],
	'<', '/dev/null', '>', '/dev/null', '2>', '/dev/null');
ok( wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND a.usename = 'locker'"),
	'at 1.1, a role with no right holds the advisory lock of the claim');
$node->safe_psql('roll', "SELECT outbox_enqueue('roll.locked', i::text) FROM generate_series(1, 100) i");
is(scalar @{ wait_for_records($broker, 'roll.locked', 100, 30) },
	100, 'and the worker publishes all the same');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'locker'");
$locker->finish;

# each client's events have the client's key, and numbers that grow with
# its commits: a key's numbers must arrive in order
my $dir = PostgreSQL::Test::Utils::tempdir;
open my $script, '>', "$dir/roll.sql" or die $!;
print $script <<'EOF';
BEGIN;
SELECT outbox_enqueue('roll.t', nextval('roll_seq')::text, key => 'c' || :client_id);
INSERT INTO roll_orders (k, n) VALUES (:client_id, nextval('roll_seq'));
COMMIT;
EOF
close $script;
my ($bench_out, $bench_err) = ('', '');
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '12', '-R', '300',
		'-f', "$dir/roll.sql", '-h', $node->host, '-p', $node->port, 'roll'
	],
	'>', \$bench_out, '2>', \$bench_err);
ok(@{ wait_for_records($broker, 'roll.t', 1, 30) } > 0, 'at 1.1, under load, the worker publishes');
my $update_start = time;
my $log_offset = -s $node->logfile;
$node->safe_psql('roll', 'ALTER EXTENSION outbox UPDATE');
diag(sprintf('ALTER EXTENSION outbox UPDATE under load took %.2f s', time - $update_start));
is($node->safe_psql('roll', "SELECT extversion FROM pg_extension WHERE extname = 'outbox'"),
	'1.4', 'updated to 1.4 while the application ran');
ok( $node->wait_for_log(
		qr/LOG:  extension outbox was updated from version 1\.1 to 1\.4, worker restarting to serve it\n.*CONTEXT:  outbox worker of database "roll", Kafka cluster \Q$broker->{bootstrap}\E\n/
	),
	'the worker says in the log that it restarts for the update, naming the database and the cluster');
ok(wait_for_sql($node, "SELECT pid IS NOT NULL FROM outbox_worker_status() WHERE database = 'roll'"),
	'and starts again');
unlike(slurp_file($node->logfile, $log_offset), qr/"outbox worker" \(PID \d+\) exited with exit code/,
	'an exit that does not read as a failure');
ok($bench->finish, 'pgbench ended well') or diag($bench_err);
like($bench_out, qr/number of failed transactions: 0 /, 'no transaction failed')
  or diag($bench_out);
my ($processed) = $bench_out =~ /number of transactions actually processed: (\d+)/;
diag("pgbench: $processed transactions, each an enqueue and a captured INSERT");
is($node->safe_psql('roll', 'SELECT count(*) FROM roll_orders'),
	$processed, 'every transaction pgbench counted committed');

ok( wait_for_sql(
		$node, "SELECT pending = 0 AND failed = 0 FROM outbox_stats WHERE topic IS NULL",
		120, 'roll'),
	'the worker publishes every event');
for my $topic ('roll.t', 'roll.orders')
{
	my $records = wait_for_records($broker, $topic, $processed, 60);
	my %event_ids;
	$event_ids{ $_->{headers}{event_id} // '' }++ for @$records;
	is(scalar @$records, $processed, "$topic: as many records as committed events");
	is(scalar(grep { $_ ne '' } keys %event_ids), $processed,
		"$topic: each committed event published once");
	my %last;
	my $disorder = 0;
	for my $r (@$records)
	{
		my ($n) = $topic eq 'roll.t' ? $r->{payload} : $r->{payload} =~ /"n": ?(\d+)/;
		my $key = $r->{key} // '';
		$disorder++ if defined $last{$key} && $last{$key} >= $n;
		$last{$key} = $n;
	}
	is($disorder, 0, "$topic: each key's events in the order of their commits");
	is(scalar keys %last, 4, "$topic: the four clients' keys");
}

# --- a fresh install and 1.0 -> 1.1 -> ...: the same schema

# The extension's schema as pg_upgrade's dump has it (which, unlike a
# plain dump, spells out every object of an extension), without what
# differs between any two databases: object ids, relfrozenxid, the dump's
# random key, the placeholders of dropped columns.
sub schema_of
{
	my ($db) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'pg_dump', '--schema-only', '--binary-upgrade',
			'-h', $node->host, '-p', $node->port, $db
		],
		'>', \$out, '2>', \$err) or die "pg_dump $db: $err";
	# a column that an update dropped (1.2 drops outbox_reader.unrecorded)
	# stays in the catalog as a placeholder, which pg_upgrade recreates
	$out =~ s/^\s+"\.+pg\.dropped\.\d+\.+" .*\n//mg;
	$out =~ s/\n-- For binary upgrade, recreate dropped column\.\n.*?DROP COLUMN "[^"]*";\n//sg;
	my @lines = grep {
		!/^\\(un)?restrict /
		  && !/binary_upgrade_set_next/
		  && !/relfrozenxid/
		  && !/^WHERE oid = '\d+'/
	} split /\n/, $out;
	s/(binary_upgrade_create_empty_extension\(.*?, )'\{[0-9,]+\}'/$1'{OIDS}'/ for @lines;
	return \@lines;
}

# CREATE EXTENSION outbox VERSION $version, in a database of its own, and
# the chain of updates from 1.0 to it in another: the same schema.
sub fresh_is_chain
{
	my ($version) = @_;
	(my $v = $version) =~ s/\.//;
	$node->safe_psql('postgres', "CREATE DATABASE fresh$v");
	$node->safe_psql('postgres', "CREATE DATABASE chain$v");
	$node->safe_psql("fresh$v", "CREATE EXTENSION outbox VERSION '$version'");
	$node->safe_psql("chain$v",
		"CREATE EXTENSION outbox VERSION '1.0'; ALTER EXTENSION outbox UPDATE TO '1.1'; ALTER EXTENSION outbox UPDATE TO '$version'"
	);
	my $fresh = schema_of("fresh$v");
	my $chain = schema_of("chain$v");
	ok(scalar(grep { /CREATE TABLE public\.outbox_log_0/ } @$fresh), "$version: the dump shows the tables");
	like(join("\n", @$fresh),
		qr/binary_upgrade_create_empty_extension\('outbox', 'public', false, '\Q$version\E', '\{OIDS\}', '\{"\n\tWHERE id OPERATOR/,
		"$version: and the extension, with the filters of the tables that pg_dump keeps");
	my @diff = grep { $fresh->[$_] ne ($chain->[$_] // '') } 0 .. $#$fresh;
	is(scalar @$chain, scalar @$fresh, "$version: the chain's schema has as many lines as a fresh one");
	is(scalar @diff, 0, "$version: a fresh install and the chain from 1.0 have the same schema")
	  or diag(join "\n", map { "fresh: $fresh->[$_]\nchain: " . ($chain->[$_] // '') } @diff[ 0 .. ($#diff < 9 ? $#diff : 9) ]);
}

# the base script of 1.3 on its own, and the newest version built on it
fresh_is_chain('1.3');
fresh_is_chain('1.4');
is($node->safe_psql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'outbox'"),
	'1.4', 'the newest version is the default one');

$node->stop;
$broker->stop;
done_testing();
