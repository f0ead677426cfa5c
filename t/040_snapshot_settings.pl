
# A snapshot in the outbox format, in a database with settings of its own
# (ALTER DATABASE SET TimeZone, DateStyle, extra_float_digits,
# bytea_output; ALTER ROLE ALL SET IntervalStyle): the outbox format writes a row's key
# and columns as their types' text, which these settings change, so a
# row's r event must be written as the database's sessions write the row's
# later changes: the same key, byte for byte (the same partition, the
# order per key kept), and the same text of each column in "after".  The
# last key that a snapshot saves, which writers parse in their own
# settings, stays in the worker's.  A session with a TimeZone of its own
# writes its own text, as it always did.  The debezium format's r events
# do not depend on settings.  A value the catalog holds that its setting
# refuses (pg_db_role_setting updated by hand) is logged and skipped: the
# snapshot finishes, with the other settings.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

# the sessions of the test take the database's settings, not the client's
delete @ENV{qw(PGTZ PGDATESTYLE PGOPTIONS)};

my ($node, $broker) =
  outbox_node_with_broker(
	'snapshot_settings',
	'outbox.poll_interval' => '100ms',
	log_min_messages => 'warning');
$broker->command("create $_ 8") for qw(stamps blobs dbz.public.dbz later);
worker_pid($node);
$node->safe_psql(
	'postgres', q{
	ALTER DATABASE postgres SET TimeZone = 'Asia/Kolkata';
	ALTER DATABASE postgres SET DateStyle = 'SQL, DMY';
	ALTER ROLE ALL SET IntervalStyle = 'iso_8601';
	ALTER DATABASE postgres SET extra_float_digits = 0;
	ALTER DATABASE postgres SET bytea_output = 'escape';
});
$node->safe_psql(
	'postgres', q{
	CREATE TABLE stamps (at timestamptz PRIMARY KEY, n int, span interval,
						 ratio float8, raw bytea, day date);
	INSERT INTO stamps
	SELECT timestamptz '2024-01-01 00:00:00+00' + i * interval '1 day', 0,
		   interval '1 day 2 hours', 1.0 / 3, '\x00ff41', date '2024-01-02' + i
	  FROM generate_series(0, 4) i;
	CREATE TABLE blobs (k bytea, day date, n int, PRIMARY KEY (k, day));
	INSERT INTO blobs SELECT decode(lpad(to_hex(i * 17), 2, '0') || 'ff', 'hex'),
							 date '2024-01-02' + i, 0
	  FROM generate_series(0, 4) i;
	CREATE TABLE dbz (at timestamptz PRIMARY KEY, n int, span interval, ratio float8);
	INSERT INTO dbz SELECT at, n, span, ratio FROM stamps;
	BEGIN;
	SELECT outbox_attach('stamps', 'stamps', format => 'outbox', snapshot => true);
	SELECT outbox_attach('blobs', 'blobs', format => 'outbox', snapshot => true);
	SELECT outbox_attach('dbz', 'dbz', format => 'debezium', snapshot => true);
	UPDATE outbox_snapshots_state SET chunk_rows = 2;
	COMMIT;
});
ok( wait_for_sql($node,
		"SELECT count(*) = 3 AND bool_and(status = 'finished') FROM outbox_snapshots"),
	'the snapshots finished');
is( $node->safe_psql('postgres',
		"SELECT last_key FROM outbox_snapshots_state WHERE relid = 'stamps'::regclass"),
	'{"2024-01-04 00:00:00+00"}',
	'the last key saved is in the worker\'s settings, not the database\'s');

# the changes, from new sessions: every row, then one row by a session
# with a TimeZone of its own
$node->safe_psql('postgres',
	'UPDATE stamps SET n = 1; UPDATE blobs SET n = 1; UPDATE dbz SET n = 1');
$node->safe_psql('postgres',
	"SET TimeZone = 'America/New_York'; UPDATE stamps SET n = 2 WHERE n = 1 AND at = (SELECT min(at) FROM stamps)"
);
ok(all_published($node, [qw(stamps blobs dbz.public.dbz)]), 'every event is published');

# Each key's records of $topic in the order of the log: [op, after (its
# text, n blanked out), partition] lists, by key.
sub events_by_key
{
	my ($topic) = @_;
	my %events;
	for my $r (@{ kafka_read($broker, $topic) })
	{
		my ($op) = $r->{payload} =~ /"op": ?"(\w)"/ or die "no op: $r->{payload}";
		my ($after) = $r->{payload} =~ /"after": ?(\{.*?\}), ?"source"/
		  or die "no after: $r->{payload}";
		my ($n) = $after =~ s/"n":(\d+)/"n":_/ ? $1 : die "no n: $after";
		push @{ $events{ $r->{key} } }, [ $op, $after, $r->{partition}, $n ];
	}
	return \%events;
}

# Does every key of $events have its r event then its u event, in one
# partition, with the same text in after but n?
sub read_then_changed
{
	my ($events, $name) = @_;
	my @wrong;
	for my $key (sort keys %$events)
	{
		my @ops = map { $_->[0] } @{ $events->{$key} };
		my ($r, $u) = @{ $events->{$key} };
		if ("@ops" ne 'r u')
		{
			push @wrong, "$key: @ops";
		}
		elsif ($r->[1] ne $u->[1] || $r->[2] != $u->[2])
		{
			push @wrong, "$key: r after $r->[1] in $r->[2], u after $u->[1] in $u->[2]";
		}
	}
	is(scalar @wrong, 0, "$name: each row's r event and u event have one key, one partition and one after")
	  or diag(join "\n", @wrong);
	return;
}

my $stamps = events_by_key('stamps');
my $own = delete $stamps->{'31/12/2023 19:00:00 EST'};
is_deeply([ map { "$_->[0] $_->[3]" } @{ $own // [] } ],
	['u 2'], 'a session with a TimeZone of its own writes its own text');
read_then_changed($stamps, 'stamps');
my @texts = split /\n/,
  $node->safe_psql('postgres', 'SELECT at FROM stamps ORDER BY at');
is_deeply([ sort keys %$stamps ], [ sort @texts ],
	'the keys are the text of the database\'s sessions');
is($texts[0], '01/01/2024 05:30:00 IST', 'in its TimeZone and DateStyle');
my ($read) = grep { $_->[0] eq 'r' } @{ $stamps->{ $texts[0] } // [] };
is( $read ? $read->[1] : undef,
	'{"at":"2024-01-01T05:30:00+05:30","n":_,"span":"P1DT2H","ratio":0.333333333333333,"raw":"\\\\000\\\\377A","day":"2024-01-02"}',
	'the r event\'s columns are the text of the database\'s sessions');

my $blobs = events_by_key('blobs');
read_then_changed($blobs, 'blobs');
is_deeply([ map { $_->[0] } @{ $blobs->{'["\\\\000\\\\377","02/01/2024"]'} // [] } ],
	[qw(r u)], 'a bytea and date key is the text of the database\'s sessions')
  or diag(join ' ', keys %$blobs);

my $dbz = events_by_key('dbz.public.dbz');
read_then_changed($dbz, 'debezium');
ok(exists $dbz->{'{"at":"2024-01-01T00:00:00.000000Z"}'}, 'the debezium key does not depend on settings')
  or diag(join ' ', keys %$dbz);

# a stored value that its setting refuses: skipped, with a warning
my $log_offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
	UPDATE pg_db_role_setting
	   SET setconfig = array_replace(array_replace(setconfig, 'TimeZone=Asia/Kolkata',
												   'TimeZone=Nowhere/Bogus'),
									 'extra_float_digits=0', 'extra_float_digits=99')
	 WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'postgres')
	   AND setrole = 0;
	CREATE TABLE later (at timestamptz PRIMARY KEY, ratio float8);
	INSERT INTO later VALUES ('2024-01-01 00:00:00+00', 1.0 / 3);
	SELECT outbox_attach('later', 'later', format => 'outbox', snapshot => true);
});
ok( wait_for_sql($node,
		"SELECT status = 'finished' FROM outbox_snapshots WHERE \"table\" = 'later'::regclass"),
	'a snapshot with refused values in the database\'s settings finishes');
my $later = wait_for_records($broker, 'later', 1);
is(scalar @$later, 1, 'its r event is published');
like($later->[0]{key}, qr{^01/01/2024 00:00:00 },
	'with the settings that were not refused (DateStyle)');
my $log = slurp_file($node->logfile, $log_offset);
like(
	$log,
	qr/WARNING:  invalid value for parameter "TimeZone": "Nowhere\/Bogus"\n.*CONTEXT:  outbox worker of database/,
	'the worker logs a refused TimeZone');
like(
	$log,
	qr/WARNING:  99 is outside the valid range for parameter "extra_float_digits".*\n.*CONTEXT:  outbox worker of database/,
	'and a refused extra_float_digits');

$node->stop;
$broker->stop;
done_testing();
