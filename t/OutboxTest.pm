
# Helpers for the outbox TAP tests: a mock Kafka cluster (test/mock_broker),
# a test schema registry (test/schema_registry.js), a server with the
# worker, enqueueing events and waiting for them, and reading what arrived
# in Kafka with kcat.

package OutboxTest;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(start_broker start_black_hole node_module_unavailable start_schema_registry
  consume_avro conf_lines outbox_settings outbox_node outbox_node_with_broker
  kafka_read kafka_read_json wait_for_records wait_for_sql
  wait_for_activity worker_pid reconfigure
  enqueue_events all_published wait_for_status missing_events
  records_by_key keys_in_order distinct_events write_file
  $LEADER_NOT_AVAILABLE $MESSAGE_TOO_LARGE $TOPIC_AUTHORIZATION_FAILED
  $INVALID_TIMESTAMP);

# Kafka error codes (the protocol's) that the tests have the mock broker
# answer with ("produce_errors 1 $TOPIC_AUTHORIZATION_FAILED")
our $LEADER_NOT_AVAILABLE = 5;
our $MESSAGE_TOO_LARGE = 10;
our $TOPIC_AUTHORIZATION_FAILED = 29;
our $INVALID_TIMESTAMP = 32;

# the repository: this file is in its t/
my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
die "$root/test/mock_broker is not built: run make test-programs"
  unless -x "$root/test/mock_broker";

# the brokers and registries started, stopped when the test ends however
# it ends
my @brokers;

# An interrupted test ends as one that ends: its END blocks stop its
# brokers (below) and its servers (PostgreSQL::Test::Cluster's), which
# would otherwise run on.
$SIG{$_} = sub { exit 1 } for qw(INT TERM HUP);

END
{
	local $?;					# the test's exit status, not the broker's
	$_->{h}->kill_kill(grace => 2) for grep { $_->{h}->pumpable } @brokers;
}

# Start @cmd, a program of the tests that prints where it listens on its
# first line and then takes commands on its standard input; stopped when
# the test ends.  Returns an object of $class whose $field is the first
# match of $pattern in that line.
sub start_program
{
	my ($class, $field, $pattern, @cmd) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(\@cmd, \$in, \$out, \$err);
	$h->pump until $out =~ /\n/ || !$h->pumpable;
	my ($address) = $out =~ $pattern or die "@cmd: $err";
	$out = '';
	my $program = bless { h => $h, in => \$in, out => \$out, $field => $address },
	  $class;
	push @brokers, $program;
	return $program;
}

# Start a mock cluster of $count brokers; returns an OutboxTest::Broker.
sub start_broker
{
	my ($count) = @_;
	return start_program('OutboxTest::Broker', 'bootstrap', qr/^(\S+)\n/,
		"$root/test/mock_broker", $count // 1);
}

# Start a cluster that accepts connections and answers nothing
# (test/black_hole.pl), at $port (default: a free one), until its command
# "forward HOST:PORT" makes it pass them on to a broker; with $target it
# forwards from the start (a cluster that starts listening at $port).
# Returns an OutboxTest::Broker.
sub start_black_hole
{
	my ($port, $target) = @_;
	return start_program('OutboxTest::Broker', 'bootstrap', qr/^(\S+)\n/,
		"$root/test/black_hole.pl", $port // 0, $target // ());
}

# Why node's modules @specs (name@version) cannot be used here, or undef:
# every module of t/drivers/package.json is installed from the npm registry
# into t/drivers/node_modules (which git ignores) at once, the first time
# one is missing (an install removes the modules it was not given).  A test
# skips what needs them, saying why.
sub node_module_unavailable
{
	my (@specs) = @_;
	my @modules = map { /^(@?[^@]+)/ } @specs;
	my $drivers = "$root/t/drivers";
	my ($out, $err) = ('', '');
	my $installed = sub {
		!grep { !-f "$drivers/node_modules/$_/package.json" } @modules;
	};
	return 'node is not installed'
	  unless eval { IPC::Run::run([ 'node', '--version' ], '>', \$out, '2>', \$err) };
	return undef if $installed->();
	my $ran = eval {
		IPC::Run::run(
			[
				'npm', 'install', '--prefix', $drivers,
				'--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error'
			],
			'>', \$out, '2>', \$err, IPC::Run::timeout(300));
	};
	return undef if $ran && $installed->();
	my @why = grep { /\S/ && !/complete log/ } split /\n/, ($err || $@ || 'npm not found');
	return "npm install @specs failed ("
	  . join('; ', @why[ 0 .. ($#why < 1 ? $#why : 1) ]) . ')';
}

# Start the test schema registry (test/schema_registry.js, which needs
# avsc: see node_module_unavailable) on a free port; %opts: user
# ("user:password", for basic auth), tls ("cert.pem,key.pem": HTTPS),
# client_ca (a CA file: client certificates it signed are required).
# Returns an OutboxTest::SchemaRegistry, whose url is where it listens.
sub start_schema_registry
{
	my (%opts) = @_;
	my @args = map { defined $opts{$_} ? ("--" . ($_ =~ tr/_/-/r), $opts{$_}) : () }
	  qw(user tls client_ca);
	my $registry = start_program('OutboxTest::SchemaRegistry', 'url',
		qr/^(http\S+)\n/, 'node', "$root/test/schema_registry.js", @args);
	$registry->{user} = $opts{user};
	return $registry;
}

# postgresql.conf lines that set %conf, in the order of their names.
sub conf_lines
{
	my (%conf) = @_;
	return join('', map { "$_ = '$conf{$_}'\n" } sort keys %conf);
}

# The postgresql.conf lines of a server with the library preloaded and the
# worker pointed at $broker, logging at level log; %conf adds settings.
sub outbox_settings
{
	my ($broker, %conf) = @_;
	return "shared_preload_libraries = 'outbox'\n"
	  . "outbox.brokers = '$broker->{bootstrap}'\n"
	  . "log_min_messages = 'log'\n"
	  . conf_lines(%conf);
}

# What a consumer of Confluent's AvroConverter reads
# (t/drivers/debezium_avro_consume.js, with kafkajs and
# @kafkajs/confluent-schema-registry): the first $count records of the
# topics @$topics, each key and value decoded by the schema its wire-format
# prefix names in $registry, Avro longs as BigInt (with
# without_bigint_hook => 1 as the library's defaults read them, an error
# for a long past 2^53), with their bytes (key_bytes, value_bytes, base64).
# Asserts that $count came; returns them, in the order they came.
sub consume_avro
{
	my ($broker, $registry, $count, $topics, %opts) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'node', "$root/t/drivers/debezium_avro_consume.js",
			$opts{without_bigint_hook} ? '--without-bigint-hook' : (),
			$broker->{bootstrap}, $registry->{url}, $count, @$topics
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(180));
	my @records = map { JSON::PP::decode_json($_) } grep { /\S/ } split /\n/, $out;
	is(scalar @records, $count, "the consumer decodes $count records of @$topics")
	  or diag($err);
	return \@records;
}

# A server named $name, started with outbox_settings($broker, %conf), the
# extension created in its database postgres.
sub outbox_node
{
	my ($name, $broker, %conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', outbox_settings($broker, %conf));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
	return $node;
}

# A mock cluster of one broker and a server whose worker publishes to it,
# as outbox_node makes it (%conf adds postgresql.conf settings): what most
# tests start with.  Returns the server and the broker.
sub outbox_node_with_broker
{
	my ($name, %conf) = @_;
	my $broker = start_broker(1);
	return (outbox_node($name, $broker, %conf), $broker);
}

# What kcat prints of every record of $topic, in the format @format gives
# (-J, or -f and a format string).
sub kcat_consume
{
	my ($broker, $topic, @format) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'kcat', '-C', '-q', '-e',
			'-b', $broker->{bootstrap},
			'-t', $topic, @format
		],
		'>', \$out, '2>', \$err);
	return $out;
}

# @records (hashes with partition and offset) in the order of the log, as
# a list reference.
sub in_log_order
{
	my (@records) = @_;
	return [ sort { $a->{partition} <=> $b->{partition}
			  || $a->{offset} <=> $b->{offset} } @records ];
}

# Every record of $topic, in (partition, offset) order: hashes with
# partition, offset, key, payload (undef for a tombstone), headers and
# timestamp (milliseconds since the Unix epoch, as the record carries it).
sub kafka_read
{
	my ($broker, $topic) = @_;
	my $out = kcat_consume($broker, $topic,
		'-Z', '-f', "%p\x1f%o\x1f%k\x1f%S\x1f%h\x1f%T\x1f%s\x1e");
	my @records;
	for my $raw (split /\x1e/, $out)
	{
		my ($p, $o, $k, $len, $h, $t, $s) = split /\x1f/, $raw, 7;
		my %headers = map { split /=/, $_, 2 } split /,/, $h;
		push @records,
		  {
			partition => $p,
			offset => $o,
			key => $k eq 'NULL' ? undef : $k,
			payload => $len == -1 ? undef : $s,
			headers => \%headers,
			timestamp => $t
		  };
	}
	return in_log_order(@records);
}

# Every record of $topic, in (partition, offset) order, as kcat -J gives
# it: hashes with partition, offset, key and payload (undef when null, as
# text), headers (a list of name, value, name, value..., in order) and ts
# (the timestamp, milliseconds since the Unix epoch).  Keys and headers
# whose values hold commas or equal signs read right this way.
sub kafka_read_json
{
	my ($broker, $topic) = @_;
	my $json = JSON::PP->new->utf8;
	return in_log_order(map { $json->decode($_) } grep { /\S/ } split /\n/,
		  kcat_consume($broker, $topic, '-J'));
}

# The "n" of each record's payload ({"n": 1}), by key, in the order the
# cluster holds them.
sub records_by_key
{
	my ($records) = @_;
	my %keys;
	for my $r (@$records)
	{
		my ($n) = $r->{payload} =~ /"n": (\d+)/;
		push @{ $keys{ $r->{key} } }, $n;
	}
	return \%keys;
}

# Is every key's n in increasing order (records_by_key), a copy published
# again aside?
sub keys_in_order
{
	my ($keys) = @_;
	for my $key (keys %$keys)
	{
		my ($last, %seen) = (0);
		for my $n (@{ $keys->{$key} })
		{
			next if $seen{$n}++;
			return 0 if $n < $last;
			$last = $n;
		}
	}
	return 1;
}

# How many distinct events (by their event_id header) the records hold.
sub distinct_events
{
	my ($records) = @_;
	my %n = map { $_->{headers}{event_id} => 1 } @$records;
	return scalar keys %n;
}

# Poll $topic until at least $count records arrived (or time is up);
# returns the records.
sub wait_for_records
{
	my ($broker, $topic, $count, $seconds) = @_;
	my $deadline = time + ($seconds // 60);
	my $records;
	while (1)
	{
		$records = kafka_read($broker, $topic);
		last if @$records >= $count || time > $deadline;
		usleep(100_000);
	}
	return $records;
}

# Poll until $sql returns 't' in $dbname (default postgres), with a 10ms
# step; false on timeout.  A server that is restarting is waited for.
sub wait_for_sql
{
	my ($node, $sql, $seconds, $dbname) = @_;
	my $deadline = time + ($seconds // 60);
	while (time < $deadline)
	{
		my ($ret, $out) = $node->psql($dbname // 'postgres', $sql);
		return 1 if $ret == 0 && $out eq 't';
		usleep(10_000);
	}
	return 0;
}

# Enqueue events $from..$to of $topic in one transaction, {"n": i}; %opts:
# keys (event i's key is i % keys; no key without it), prefix (before the
# key: prefix || i % keys), dbname (default postgres).
sub enqueue_events
{
	my ($node, $topic, $from, $to, %opts) = @_;
	my $prefix = $opts{prefix} // '';
	my $key = defined $opts{keys} ? ", key => '$prefix' || (i % $opts{keys})" : '';
	$node->safe_psql($opts{dbname} // 'postgres',
		"SELECT outbox_enqueue('$topic', ('{\"n\": ' || i || '}')::jsonb$key) FROM generate_series($from, $to) i"
	);
	return;
}

# The SQL condition "topic IN (...)" of $topics: a topic or a list of them.
sub topic_in
{
	my ($topics) = @_;
	return 'topic IN (' . join(', ', map { "'$_'" } ref $topics ? @$topics : $topics) . ')';
}

# Wait until every event of $topics (a topic, a list of them, or undef:
# every topic) is published, and there is one at least; false on timeout.
sub all_published
{
	my ($node, $topics, $seconds) = @_;
	my $where = defined $topics ? ' WHERE ' . topic_in($topics) : '';
	return wait_for_sql($node,
		"SELECT bool_and(status = 'published') FROM outbox_messages$where",
		$seconds);
}

# Wait until event $id has $status; false on timeout.
sub wait_for_status
{
	my ($node, $id, $status, $seconds) = @_;
	return wait_for_sql($node,
		"SELECT status = '$status' FROM outbox_messages WHERE id = $id", $seconds);
}

# How many events $node committed to $topics (a topic or a list of them)
# that none of @records carries (by their event_id header).
sub missing_events
{
	my ($node, $topics, @records) = @_;
	my %arrived = map { $_->{headers}{event_id} => 1 } @records;
	return scalar grep { !$arrived{$_} } split /\n/,
	  $node->safe_psql('postgres',
		'SELECT event_id FROM outbox_messages WHERE ' . topic_in($topics));
}

# Write $text to the file $path, with permissions $mode; returns $path.
sub write_file
{
	my ($path, $mode, $text) = @_;
	open my $fh, '>', $path or die "$path: $!";
	print $fh $text;
	close $fh;
	chmod $mode, $path;
	return $path;
}

# Wait until the worker's activity in pg_stat_activity starts with $prefix;
# false on timeout.
sub wait_for_activity
{
	my ($node, $prefix) = @_;
	return wait_for_sql($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'outbox worker' AND query LIKE '$prefix%'"
	);
}

# The pid of the publishing worker, once it runs (past the owner lookup)
# and its producer is connected.
sub worker_pid
{
	my ($node) = @_;
	wait_for_sql($node,
		"SELECT state IN ('idle', 'publishing') AND brokers_up > 0 FROM outbox_worker_status()"
	);
	return $node->safe_psql('postgres', "SELECT pid FROM outbox_worker_status()");
}

# Change settings with ALTER SYSTEM ("SET name = value", "RESET name"),
# reload, and give the worker time to see them.
sub reconfigure
{
	my ($node, @clauses) = @_;
	$node->safe_psql('postgres',
		join('', map { "ALTER SYSTEM $_;" } @clauses) . 'SELECT pg_reload_conf()');
	sleep 1;
	return;
}

package OutboxTest::Broker;

# Send one control command (see test/mock_broker.c); dies unless "ok".
sub command
{
	my ($self, $cmd) = @_;
	${ $self->{in} } .= "$cmd\n";
	$self->{h}->pump until ${ $self->{out} } =~ /\n/;
	my $reply = ${ $self->{out} };
	${ $self->{out} } = '';
	chomp $reply;
	die ref($self) . ": $cmd: $reply" unless $reply eq 'ok';
	return;
}

sub stop
{
	my ($self) = @_;
	$self->{h}->signal('TERM');
	$self->{h}->finish;
	return;
}

package OutboxTest::SchemaRegistry;

# The registry's control commands (test/schema_registry.js), as the
# broker's: "down" (it stops listening, what it holds kept) and "up" (it
# listens again, on the same port).
use parent -norequire, 'OutboxTest::Broker';

sub down { $_[0]->command('down'); return; }
sub up { $_[0]->command('up'); return; }

# An HTTP request to the registry, as a client with its credentials;
# returns HTTP::Tiny's response.
sub http
{
	my ($self, $method, $path, $body) = @_;
	my %headers = (
		'Content-Type' => 'application/vnd.schemaregistry.v1+json');
	$headers{Authorization} =
	  'Basic ' . MIME::Base64::encode_base64($self->{user}, '')
	  if defined $self->{user};
	return HTTP::Tiny->new->request($method, "$self->{url}$path",
		{ headers => \%headers, defined $body ? (content => $body) : () });
}

# The schemas registered under $subject, by version: hashes of id and
# schema (parsed JSON, as the registry compares schemas); none for a
# subject the registry does not have.
sub versions
{
	my ($self, $subject) = @_;
	my $list = $self->http('GET', "/subjects/$subject/versions");
	return [] if $list->{status} == 404;
	return [
		map {
			my $v = JSON::PP::decode_json(
				$self->http('GET', "/subjects/$subject/versions/$_")->{content});
			{ id => $v->{id}, schema => JSON::PP::decode_json($v->{schema}) }
		} @{ JSON::PP::decode_json($list->{content}) }
	];
}

# How many requests came, by "METHOD path", and in all (total).
sub requests
{
	my ($self) = @_;
	return JSON::PP::decode_json($self->http('GET', '/__requests')->{content});
}

# The next answer, whatever is asked: status, body, repeat (the body that
# many times), delay_ms.
sub next_answer
{
	my ($self, %answer) = @_;
	$self->http('POST', '/__next', JSON::PP::encode_json(\%answer));
	return;
}

1;
