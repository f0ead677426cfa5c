
# Snapshots against writers, slow and hostile tables, and DDL.
#
# - Order: a table of 1,000 rows attached with format => 'debezium' and
#   snapshot => true in a transaction that then updates 40 of its rows,
#   while pgbench updates, inserts and deletes rows: no change of a row is
#   published before the row's r record, the r records are marked as
#   Debezium's PostgreSQL connector marks a snapshot of one table
#   (source.snapshot "first", "true"..., "last": SnapshotMarkerResolver in
#   debezium-connector-common/src/main/java/io/debezium/relational/
#   RelationalSnapshotChangeEventSource.java, and expectedSnapshotRecord-
#   FromPosition in debezium-connector-postgres/src/test/java/io/debezium/
#   connector/postgresql/AbstractRecordsProducerTest.java), and a consumer
#   that applies them in order ends with the table's rows.
# - Time: a table whose row-level security policy (FORCEd on its owner)
#   sleeps 20 ms per row does not hold publishing up: an event of another
#   topic is published while its snapshot runs, in smaller chunks, to the
#   end.  One whose policy sleeps for ever and catches the cancel fails
#   its snapshot, with the reason in outbox_snapshots; the worker, stopped
#   by its chunk's timeout or by pg_terminate_backend, publishes
#   meanwhile.
# - DDL: a change of the key's type or collation, or the key's unique
#   index dropped, half-way through, fails the snapshot visibly (status
#   failed, last_error) instead of letting it finish short; asked for
#   again, it reads every row.
# - search_path: a writer whose path names the key's type (a domain of
#   public, with the default path) leaves its change of a row ahead of the
#   snapshot to the row's r event, as any writer does.

use strict;
use warnings;

use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my ($node, $broker) =
  outbox_node_with_broker('snapshot_guards', 'outbox.poll_interval' => '100ms');
$broker->command('create dbz.public.items 1');
worker_pid($node);

#
# Order
#
$node->safe_psql(
	'postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO items SELECT i, 0 FROM generate_series(1, 1000) i;
});
my $dir = PostgreSQL::Test::Utils::tempdir();
PostgreSQL::Test::Utils::append_to_file("$dir/write.sql",
	"\\set id random(1, 1200)\n"
	  . "UPDATE items SET n = n + 1 WHERE id = :id;\n"
	  . "INSERT INTO items VALUES (:id, -1) ON CONFLICT (id) DO NOTHING;\n"
	  . "DELETE FROM items WHERE id = :id + 7;\n");
my ($out, $err) = ('', '');
my $writers = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '2', '-j', '2', '-T', '4', '-R', '200',
		'-f', "$dir/write.sql", $node->connstr('postgres')
	],
	'>', \$out, '2>', \$err);
usleep(300_000);
# chunks of 100 rows to begin with, and 40 rows changed before any is read
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT outbox_attach('items', 'dbz', format => 'debezium', snapshot => true);
	UPDATE outbox_snapshots_state SET chunk_rows = 100;
	UPDATE items SET n = n + 1000 WHERE id % 25 = 0;
	COMMIT;
});
$writers->finish;
is($writers->result(0), 0, 'the writers ran') or diag($err);
ok( wait_for_sql($node,
		"SELECT status = 'finished' FROM outbox_snapshots WHERE \"table\" = 'items'::regclass"),
	'the snapshot of items finished');
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE status <> 'published'"),
	'every event is published');

my $records = kafka_read($broker, 'dbz.public.items');
my (%state, %read, %changed_first, @marks);
for my $r (@$records)
{
	next unless defined $r->{payload};
	my ($id) = $r->{key} =~ /^\{"id":(\d+)\}$/ or die "bad key $r->{key}";
	my ($op) = $r->{payload} =~ /"op":"(\w)"/;
	if ($op eq 'r')
	{
		my ($mark) = $r->{payload} =~ /"snapshot":"(\w+)"/;
		push @marks, $mark;
		$read{$id} = 1;
	}
	elsif (!$read{$id})
	{
		$changed_first{$id} = 1;
	}
	if ($op eq 'd')
	{
		delete $state{$id};
	}
	else
	{
		my ($n) = $r->{payload} =~ /"after":\{"id":\d+,"n":(-?\d+)\}/ or die "no after: $r->{payload}";
		$state{$id} = $n;
	}
}
my @changed_then_read = grep { $read{$_} } keys %changed_first;
is(scalar @changed_then_read, 0, 'no change of a row was published before its r record')
  or diag("changed, then read: @changed_then_read[0 .. ($#changed_then_read < 9 ? $#changed_then_read : 9)]");
is($marks[0], 'first', 'the first r record is marked "first"');
is($marks[-1], 'last', 'the last is marked "last"');
is(scalar(grep { $_ ne 'true' } @marks[ 1 .. $#marks - 1 ]), 0, 'the others "true"');
is( $node->safe_psql('postgres',
		"SELECT rows_done FROM outbox_snapshots WHERE \"table\" = 'items'::regclass"),
	scalar @marks, 'an r record per row read');
my %table = map { split /\|/ } split /\n/,
  $node->safe_psql('postgres', 'SELECT id, n FROM items');
is_deeply(\%state, \%table, 'the consumer applying the records in order has the table\'s rows');
is(scalar(grep { $_ % 25 == 0 && ($table{$_} // 0) >= 1000 } keys %table) > 0,
	1, 'with the changes made before the first chunk');

# a partitioned table: the writers of its partitions wait for the chunks
# of its snapshot as those of a table do
$node->safe_psql(
	'postgres', q{
	CREATE TABLE parts (id int PRIMARY KEY, n int NOT NULL) PARTITION BY RANGE (id);
	CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (1) TO (501);
	CREATE TABLE parts_high PARTITION OF parts FOR VALUES FROM (501) TO (1001);
	INSERT INTO parts SELECT i, 0 FROM generate_series(1, 1000) i;
	BEGIN;
	SELECT outbox_attach('parts', 'parts', snapshot => true);
	UPDATE outbox_snapshots_state SET chunk_rows = 100;
	UPDATE parts SET n = 1 WHERE id % 10 = 0;
	DELETE FROM parts WHERE id % 100 = 1;
	INSERT INTO parts VALUES (1000 - 1, 2) ON CONFLICT (id) DO UPDATE SET n = 2;
	COMMIT;
});
ok( wait_for_sql($node,
		"SELECT status = 'finished' FROM outbox_snapshots WHERE \"table\" = 'parts'::regclass"),
	'the snapshot of the partitioned table finished');
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE status <> 'published'"),
	'every event is published');
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(DISTINCT convert_from(payload, 'UTF8')::jsonb ->> 'op', ',')
	  FROM outbox_messages WHERE topic = 'parts'}),
	'r', 'its changes before the rows were read are in their r events');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM outbox_messages m, parts p
	 WHERE m.topic = 'parts' AND m.key = p.id::text
	   AND convert_from(m.payload, 'UTF8')::jsonb -> 'after' ->> 'n' = p.n::text}),
	$node->safe_psql('postgres', 'SELECT count(*) FROM parts'),
	'one r event per row, with its values');

#
# Time
#
# A table $name of $rows rows owned by slowpoke, whose row-level security
# policy, forced on its owner, runs $body for each row; snapshotted.
$node->safe_psql('postgres', 'CREATE ROLE slowpoke; GRANT CREATE ON SCHEMA public TO slowpoke');
sub policed_table
{
	my ($name, $rows, $body) = @_;
	$node->safe_psql(
		'postgres', qq{
		SET ROLE slowpoke;
		CREATE FUNCTION ${name}_policy(id int) RETURNS boolean LANGUAGE plpgsql AS \$\$
		BEGIN
			$body
			RETURN true;
		END
		\$\$;
		CREATE TABLE $name (id int PRIMARY KEY);
		INSERT INTO $name SELECT generate_series(1, $rows);
		ALTER TABLE $name ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
		CREATE POLICY everything ON $name USING (${name}_policy(id));
		RESET ROLE;
		SELECT outbox_attach('$name', '$name', snapshot => true);
	});
	return;
}

policed_table('slow_rows', 200, 'PERFORM pg_sleep(0.02);');
ok(wait_for_activity($node, 'taking a snapshot of table "slow_rows"'),
	'the worker reads the slow table');
$node->safe_psql('postgres', "SELECT outbox_enqueue('other', 'meanwhile'::text)");
ok( wait_for_sql($node,
		"SELECT status = 'published' FROM outbox_messages WHERE topic = 'other'"),
	'an event of another topic is published');
is( $node->safe_psql(
		'postgres',
		"SELECT status || ' ' || (rows_done < 200) FROM outbox_snapshots WHERE \"table\" = 'slow_rows'::regclass"
	),
	'running true',
	'while the slow snapshot runs');
ok( wait_for_sql(
		$node,
		"SELECT status = 'finished' AND rows_done = 200 FROM outbox_snapshots WHERE \"table\" = 'slow_rows'::regclass",
		180),
	'it reads every row, in chunks that fit its time');

# a policy that never ends and catches the cancel
policed_table(
	'stubborn_rows', 3, q{
	FOR i IN 1 .. 600 LOOP
		BEGIN
			PERFORM pg_sleep(0.1);
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;});
ok(wait_for_activity($node, 'taking a snapshot of table "stubborn_rows"'),
	'the worker reads the stubborn table');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND query LIKE 'taking a snapshot%'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(wait_for_sql($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'pg_terminate_backend stops the worker in a chunk');
$node->safe_psql('postgres', "SELECT outbox_enqueue('other', 'later'::text)");
ok( wait_for_sql($node,
		"SELECT count(*) = 2 FROM outbox_messages WHERE topic = 'other' AND status = 'published'"),
	'the worker publishes again');
ok( wait_for_sql(
		$node,
		"SELECT status = 'failed' FROM outbox_snapshots WHERE \"table\" = 'stubborn_rows'::regclass",
		180),
	'the stubborn snapshot fails');
like(
	$node->safe_psql(
		'postgres',
		"SELECT last_error FROM outbox_snapshots WHERE \"table\" = 'stubborn_rows'::regclass"),
	qr/the worker stopped during a chunk of 1 rows .* a single row takes longer than that/,
	'saying why');
ok( $node->log_contains('snapshot of table "stubborn_rows" failed'),
	'and the log says so');

# a policy fast for the first rows of each transaction, then stubborn: the
# chunks shrink until they fit, and do not grow back to stop the worker
# again and again
my $log_offset = -s $node->logfile;
policed_table(
	'spiky_rows', 300, q{
	IF coalesce(nullif(current_setting('spiky.n', true), '')::int, 0) >= 50 THEN
		BEGIN
			PERFORM pg_sleep(5);
		EXCEPTION WHEN query_canceled THEN
			PERFORM pg_sleep(5);
		END;
	END IF;
	PERFORM set_config('spiky.n', (coalesce(nullif(current_setting('spiky.n', true), '')::int, 0) + 1)::text, true);});
ok( wait_for_sql(
		$node,
		"SELECT status = 'finished' AND rows_done = 300 FROM outbox_snapshots WHERE \"table\" = 'spiky_rows'::regclass",
		180),
	'a table slow past its first rows has its snapshot taken in small chunks');
my $stops = () = slurp_file($node->logfile, $log_offset) =~ /terminating background worker "outbox worker"/g;
ok($stops <= 2, "stopping the worker at most twice, for the chunks of 1,000 and 100 rows ($stops times)");

#
# DDL
#

# A table $table keyed by a $type, 50,000 rows, attached with a snapshot
# read 100 rows a chunk, which has begun.
sub slow_snapshot
{
	my ($table, $type) = @_;
	$node->safe_psql(
		'postgres', qq{
		CREATE TABLE $table (k $type PRIMARY KEY, v text);
		INSERT INTO $table SELECT i::text::$type, 'x' FROM generate_series(1, 50000) i;
		BEGIN;
		SELECT outbox_attach('$table', '$table', snapshot => true);
		UPDATE outbox_snapshots_state SET chunk_rows = 100;
		COMMIT;
	});
	ok( wait_for_sql($node,
			"SELECT rows_done >= 200 FROM outbox_snapshots WHERE \"table\" = '$table'::regclass"),
		"$table: the snapshot runs");
	return;
}

# Snapshot $table (rows 1 to 50,000 keyed by a column "k" of $type), pause
# it half-way with a transaction that changed a row ahead of it, run $ddl,
# then let both go: the snapshot fails saying $why, and asked for again
# (after $mend, if given) reads every row.
sub ddl_fails
{
	my ($table, $type, $ddl, $why, $mend) = @_;
	slow_snapshot($table, $type);
	my $held = $node->background_psql('postgres');
	$held->query_safe(
		"BEGIN; UPDATE $table SET v = 'held' WHERE k = (SELECT max(k) FROM $table)");
	my ($o, $e) = ('', '');
	my $alter = IPC::Run::start([ 'psql', '-X', '-c', $ddl, '-d', $node->connstr('postgres') ],
		'>', \$o, '2>', \$e);
	ok( wait_for_sql($node,
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = '$ddl'"),
		"$table: the DDL waits");
	$held->query_safe('COMMIT');
	$held->quit;
	$alter->finish;
	is($alter->result(0), 0, "$table: $ddl") or diag($e);
	ok( wait_for_sql($node,
			"SELECT status = 'failed' FROM outbox_snapshots WHERE \"table\" = '$table'::regclass"),
		"$table: the snapshot fails");
	my ($done, $error) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT rows_done, last_error FROM outbox_snapshots WHERE \"table\" = '$table'::regclass");
	ok($done < 50000, "$table: short of the rows ($done)");
	like($error, $why, "$table: saying why");
	$node->safe_psql('postgres', $mend) if $mend;
	$node->safe_psql('postgres', "SELECT outbox_attach('$table', '$table', snapshot => true)");
	ok( wait_for_sql(
			$node,
			"SELECT status = 'finished' AND rows_done = 50000 FROM outbox_snapshots WHERE \"table\" = '$table'::regclass",
			120),
		"$table: asked for again, it reads every row");
	return;
}

ddl_fails('retyped', 'bigint', 'ALTER TABLE retyped ALTER COLUMN k TYPE text',
	qr/key column "k" is now text COLLATE "default" USING pg_catalog.text_ops, it was bigint USING pg_catalog.integer_ops/);
ddl_fails('recollated', 'text', 'ALTER TABLE recollated ALTER COLUMN k TYPE text COLLATE "C"',
	qr/key column "k" is now text COLLATE "C" .* it was text COLLATE "default"/);
ddl_fails('unkeyed', 'int', 'ALTER TABLE unkeyed DROP CONSTRAINT unkeyed_pkey',
	qr/no longer NOT NULL and the columns of a unique index/,
	'ALTER TABLE unkeyed ADD PRIMARY KEY (k)');

# A writer whose search_path names the key's type (a domain of public,
# with the default path): a row it changes ahead of the snapshot is left to
# the row's r event, which the snapshot writes once the writer has
# committed, as for any writer; no event of the change comes before it.
$node->safe_psql('postgres', 'CREATE DOMAIN ident AS int');
slow_snapshot('pathed', 'ident');
my $pathed = $node->background_psql('postgres');
$pathed->query_safe('SET search_path = "$user", public');
$pathed->query_safe("BEGIN; UPDATE pathed SET v = 'held' WHERE k = 50000");
is( $pathed->query_safe(
		"SELECT count(*) FROM outbox_messages WHERE topic = 'pathed' AND key = '50000'"),
	0, 'pathed: the change of a row ahead of the snapshot is left to it');
$pathed->query_safe('COMMIT');
$pathed->quit;
ok( wait_for_sql(
		$node,
		"SELECT status = 'finished' AND rows_done = 50000 FROM outbox_snapshots WHERE \"table\" = 'pathed'::regclass",
		120),
	'pathed: the snapshot reads every row');
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE status <> 'published'"),
	'pathed: every event is published');
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(convert_from(payload, 'UTF8')::jsonb ->> 'op' || ' '
					  || (convert_from(payload, 'UTF8')::jsonb -> 'after' ->> 'v'), ', ' ORDER BY id)
	  FROM outbox_messages WHERE topic = 'pathed' AND key = '50000'}),
	'r held', 'pathed: the row\'s one event is its r event, with the change');

# a database still at 1.2: its snapshots taken as 1.2 took them (chunks
# FOR SHARE, every change published), each chunk bounded in time
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql(
	'old', q{
	CREATE EXTENSION outbox VERSION '1.2';
	CREATE TABLE kept (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO kept SELECT i, 0 FROM generate_series(1, 3000) i;
	BEGIN;
	SELECT outbox_attach('kept', 'kept', snapshot => true);
	UPDATE kept SET n = 1 WHERE id % 100 = 0;
	COMMIT;
});
ok( wait_for_sql(
		$node, 'SELECT finished IS NOT NULL AND rows_done = 3000 FROM outbox_snapshots',
		60, 'old'),
	'a database at 1.2 has its snapshot taken');
ok( wait_for_sql(
		$node, "SELECT count(*) = 0 FROM outbox_messages WHERE status <> 'published'",
		60, 'old'),
	'and published');
is( $node->safe_psql(
		'old', q{
	SELECT string_agg(op || ' ' || n, ', ' ORDER BY op)
	  FROM (SELECT convert_from(payload, 'UTF8')::jsonb ->> 'op' AS op, count(*) AS n
			  FROM outbox_messages GROUP BY 1) o}),
	'r 3000, u 30', 'a read per row, and the changes made before it');

$node->stop;
$broker->stop;
done_testing();
