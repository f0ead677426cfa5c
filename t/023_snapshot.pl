
# A snapshot on attach, while the application writes: a table of 100,000
# rows attached with outbox_attach(..., format => 'debezium', snapshot =>
# true) while four sessions (pgbench) update, delete, insert and move
# (change the key of) random rows.  The worker reads the table in chunks
# between its batches.  A consumer that applies the records of the topic
# in order, key by key (r, c and u as an upsert, d as a delete), ends
# with the table's exact rows, compared row by row, and no change of a
# row comes before the row's r record; outbox_snapshots shows
# the progress and the finish; the writers are never held up for long
# (the longest transaction of pgbench is measured).

use strict;
use warnings;

use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $ROWS = 100_000;
my $TOPIC = 'inventory.public.accounts';
my $WRITERS = 4;
my $RATE = 400;				# transactions per second, all writers
my $LONGEST_WAIT_MS = 2000;	# what "never held up for long" allows

my ($node, $broker) =
  outbox_node_with_broker('snapshot', 'outbox.poll_interval' => '100ms');
# the mock broker keeps about 5 MB per partition: enough partitions for all
$broker->command("create $TOPIC 64");
$node->safe_psql(
	'postgres', qq{
	CREATE TABLE accounts (id bigint PRIMARY KEY, balance int NOT NULL, note text);
	INSERT INTO accounts SELECT i, 0, 'initial' FROM generate_series(1, $ROWS) i;
	CREATE SEQUENCE moved START 1000001;
});

# the writers: update, delete, insert and move random rows, one per
# transaction
my $dir = PostgreSQL::Test::Utils::tempdir();
my %scripts = (
	update => "UPDATE accounts SET balance = balance + 1, note = 'updated' WHERE id = :id;",
	delete => "DELETE FROM accounts WHERE id = :id;",
	insert => "INSERT INTO accounts VALUES (:id, -1, 'inserted') ON CONFLICT (id) DO NOTHING;",
	move => "UPDATE accounts SET id = nextval('moved') WHERE id = :id;");
my %weights = (update => 6, delete => 2, insert => 1, move => 1);
for my $name (keys %scripts)
{
	open my $fh, '>', "$dir/$name.sql" or die $!;
	print $fh "\\set id random(1, $ROWS)\n$scripts{$name}\n";
	close $fh;
}

# Start a run of pgbench of $seconds, logging each transaction; it ends
# at $writers_end.
my $run = 0;
my $writers_end;
sub start_writers
{
	my ($seconds) = @_;
	$run++;
	my ($out, $err) = ('', '');
	$writers_end = time + $seconds;
	return IPC::Run::start(
		[
			'pgbench', '-n', '-c', $WRITERS, '-j', $WRITERS, '-T', $seconds,
			'-R', $RATE, '-l', "--log-prefix=$dir/run$run",
			(map { ('-f', "$dir/$_.sql\@$weights{$_}") } sort keys %scripts),
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
}

# the writers start, then the table is attached with a snapshot
my $writers = start_writers(5);
usleep(500_000);
$node->safe_psql('postgres',
	"SELECT outbox_attach('accounts', 'inventory', format => 'debezium', snapshot => true)");

# the progress, looked at while the writers go on, in runs of pgbench
my @progress;
my $deadline = time + 300;
my $finished = 0;
my $writers_failed = 0;
while (time < $deadline)
{
	my ($done, $estimated, $end) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT rows_done, rows_estimated, finished IS NOT NULL FROM outbox_snapshots WHERE \"table\" = 'accounts'::regclass"
	  );
	push @progress, [ $done, $estimated ];
	$finished = $end eq 't';
	if (time > $writers_end)
	{
		$writers_failed++ unless $writers->finish;
		last if $finished;
		$writers = start_writers(3);
	}
	usleep(50_000);
}
ok($finished, 'the snapshot finished, while the writers went on');
is($writers_failed, 0, 'every run of the writers ended without error');

my ($rows_done, $estimated, $started, $ended) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT rows_done, rows_estimated, floor(extract(epoch FROM started) * 1000)::bigint, floor(extract(epoch FROM finished) * 1000)::bigint FROM outbox_snapshots"
  );
note "snapshot: $rows_done rows in " . ($ended - $started) . " ms, $run runs of pgbench";
ok($estimated > $ROWS / 2 && $estimated < $ROWS * 2,
	"outbox_snapshots estimated the rows ($estimated)");
ok((grep { $_->[0] > 0 && $_->[0] < $rows_done } @progress),
	'outbox_snapshots showed the snapshot in progress');

# every event published
ok( wait_for_sql($node,
		"SELECT count(*) = 0 FROM outbox_messages WHERE status <> 'published'", 300),
	'every event is published');

# the consumer: each record of the topic, in order, applied by key
my ($out, $err) = ('', '');
IPC::Run::run(
	[
		'kcat', '-C', '-q', '-e', '-Z', '-b', $broker->{bootstrap}, '-t', $TOPIC,
		'-f', "%p %o %k\t%s\n"
	],
	'>', \$out, '2>', \$err);
my @records;
for my $line (split /\n/, $out)
{
	my ($p, $o, $key, $value) = $line =~ /^(\d+) (\d+) (\S*)\t(.*)$/ or die "bad line: $line";
	push @records, [ $p, $o, $key, $value ];
}
@records = sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] } @records;
my %offsets;
$offsets{ $_->[0] }++ for @records;
is( scalar(grep { $_->[1] >= $offsets{ $_->[0] } } @records),
	0, 'the broker kept every record (each partition from offset 0, without a gap)');

my %state;
my %ops;
my ($snapshot_reads, $first_marks, $last_marks, $changes_during) = (0, 0, 0, 0);
# the keys that have an r record, and the changes of one before it
my %read = map { $_->[3] =~ /"op":"r"/ ? ($_->[2] => 1) : () } @records;
my %before_read;
for my $r (@records)
{
	my ($key, $value) = ($r->[2], $r->[3]);
	if ($value eq 'NULL')
	{
		# the tombstone that follows each delete (tombstones.on.delete)
		$ops{tombstone}++;
		next;
	}
	my ($op) = $value =~ /"op":"(\w)"/;
	my ($snapshot, $ts) = $value =~ /"snapshot":"(\w+)","db"/;
	($ts) = $value =~ /"source":\{[^}]*?"ts_ms":(\d+)/;
	my ($id) = $key =~ /^\{"id":(\d+)\}$/;
	$ops{$op}++;
	if ($op eq 'r')
	{
		$snapshot_reads++;
		$first_marks++ if $snapshot eq 'first';
		$last_marks++ if $snapshot eq 'last';
		delete $read{$key};
	}
	elsif ($read{$key})
	{
		$before_read{$key}++;
	}
	elsif ($ts >= $started && $ts <= $ended)
	{
		$changes_during++;
	}
	if ($op eq 'd')
	{
		delete $state{$id};
	}
	else
	{
		my ($after_id, $balance, $note) =
		  $value =~ /"after":\{"id":(\d+),"balance":(-?\d+),"note":"([^"]*)"\}/
		  or die "no after in: $value";
		die "key $id, row $after_id" unless $after_id == $id;
		$state{$id} = "$balance|$note";
	}
}
note 'records: ' . join(', ', map { "$_ $ops{$_}" } sort keys %ops);
is($snapshot_reads, $rows_done, 'one r record per row the snapshot read');
is($first_marks, 1, 'the first of them says so');
is($last_marks, 1, 'the last of them says so');
is(scalar(keys %before_read), 0, 'no change of a row came before the row\'s r record');
diag "changed before read: " . join(' ', (sort keys %before_read)[0 .. 9]) if %before_read;
ok($changes_during > 0, "changes were captured while the snapshot ran ($changes_during)");

# the consumer's rows and the table's, row by row
my %table = map { my ($id, $rest) = split /\|/, $_, 2; ($id => $rest) }
  split /\n/, $node->safe_psql('postgres', 'SELECT id, balance, note FROM accounts ORDER BY id');
my @missing = grep { !exists $state{$_} } keys %table;
my @extra = grep { !exists $table{$_} } keys %state;
my @different = grep { exists $state{$_} && $state{$_} ne $table{$_} } keys %table;
is(scalar @missing, 0, 'no row of the table is missing from the consumer\'s');
is(scalar @extra, 0, 'the consumer has no row the table has not');
is(scalar @different, 0, 'every row is the same, value by value');
note 'rows: ' . scalar(keys %table) . ' in the table, ' . scalar(keys %state) . ' applied';
diag "different: @different[0 .. ($#different < 9 ? $#different : 9)]" if @different;
diag "missing: @missing[0 .. ($#missing < 9 ? $#missing : 9)]" if @missing;

# the writers: the longest transaction (what it waited for included)
my ($longest, $transactions) = (0, 0);
for my $log (glob "$dir/run*")
{
	open my $fh, '<', $log or die $!;
	while (<$fh>)
	{
		my @f = split;
		my $ms = ($f[2] - ($f[6] // 0)) / 1000;
		$longest = $ms if $ms > $longest;
		$transactions++;
	}
	close $fh;
}
note "writers: $transactions transactions, the longest $longest ms";
ok($transactions > 0, 'the writers wrote');
ok($longest < $LONGEST_WAIT_MS,
	"no writer waited long: the longest transaction took $longest ms");

# The chunks read the table as its owner, in a security-restricted
# context, as maintenance commands run a table's code: a cast of the
# owner's that the outbox format's envelope runs (row_to_json) runs as
# that owner, not as the worker's role (a superuser here), and cannot
# create a temporary table.
$node->safe_psql(
	'postgres', q{
	CREATE ROLE mallory;
	GRANT CREATE ON SCHEMA public TO mallory;
	SET ROLE mallory;
	CREATE TYPE mood AS ENUM ('fine');
	CREATE TABLE seen (who name, restricted boolean);
	CREATE FUNCTION mood_json(m mood) RETURNS json LANGUAGE plpgsql AS $$
	BEGIN
		BEGIN
			CREATE TEMP TABLE probe (x int);
			INSERT INTO public.seen VALUES (current_user, false);
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO public.seen VALUES (current_user, true);
		END;
		RETURN to_json(m::text);
	END
	$$;
	CREATE CAST (mood AS json) WITH FUNCTION mood_json(mood);
	CREATE TABLE moods (id int PRIMARY KEY, m mood);
	INSERT INTO moods VALUES (1, 'fine'), (2, 'fine');
	RESET ROLE;
	SELECT outbox_attach('moods', 'moods', snapshot => true);
});
ok( wait_for_sql($node,
		"SELECT finished IS NOT NULL FROM outbox_snapshots WHERE \"table\" = 'moods'::regclass"),
	'a table of another role is snapshotted');
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT who || ' ' || restricted, ',') FROM seen"),
	'mallory true', 'its code ran as its owner, restricted, never as the worker\'s role');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(convert_from(payload, 'UTF8')::jsonb #>> '{after,m}', ',') FROM outbox_messages WHERE topic = 'moods'"
	),
	'fine,fine',
	'and the cast made the values');

$node->stop;
$broker->stop;
done_testing();
