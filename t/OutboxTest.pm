
# Helpers for the outbox TAP tests: a mock Kafka cluster (test/mock_broker),
# a test schema registry (test/schema_registry.js), a server with the
# worker, and reading what arrived in Kafka with kcat.

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
  consume_avro outbox_node kafka_read kafka_read_json wait_for_records wait_for_sql
  wait_for_activity worker_pid reconfigure records_by_key keys_in_order
  distinct_events);

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

# Start a mock cluster of $count brokers; returns an OutboxTest::Broker.
sub start_broker
{
	my ($count) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ "$root/test/mock_broker", $count // 1 ],
		\$in, \$out, \$err);
	$h->pump until $out =~ /\n/;
	my ($bootstrap) = $out =~ /^(\S+)\n/;
	$out = '';
	my $broker = bless {
		h => $h,
		in => \$in,
		out => \$out,
		bootstrap => $bootstrap
	}, 'OutboxTest::Broker';
	push @brokers, $broker;
	return $broker;
}

# Start a cluster that accepts connections and answers nothing
# (test/black_hole.pl), at $port (default: a free one), until its command
# "forward HOST:PORT" makes it pass them on to a broker; with $target it
# forwards from the start (a cluster that starts listening at $port).
# Returns an OutboxTest::Broker.
sub start_black_hole
{
	my ($port, $target) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ "$root/test/black_hole.pl", $port // 0, $target // () ],
		\$in, \$out, \$err);
	$h->pump until $out =~ /\n/ || !$h->pumpable;
	my ($bootstrap) = $out =~ /^(\S+)\n/ or die "black_hole.pl: $err";
	$out = '';
	my $hole = bless {
		h => $h,
		in => \$in,
		out => \$out,
		bootstrap => $bootstrap
	}, 'OutboxTest::Broker';
	push @brokers, $hole;
	return $hole;
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
	my ($in, $out, $err) = ('', '', '');
	my @args = map { defined $opts{$_} ? ("--" . ($_ =~ tr/_/-/r), $opts{$_}) : () }
	  qw(user tls client_ca);
	my $h = IPC::Run::start([ 'node', "$root/test/schema_registry.js", @args ],
		\$in, \$out, \$err);
	$h->pump until $out =~ /\n/ || !$h->pumpable;
	my ($url) = $out =~ /^(http\S+)\n/ or die "schema_registry.js: $err";
	$out = '';
	my $registry = bless {
		h => $h,
		in => \$in,
		out => \$out,
		url => $url,
		user => $opts{user}
	}, 'OutboxTest::SchemaRegistry';
	push @brokers, $registry;
	return $registry;
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

# A server with the library preloaded, the worker pointed at $broker and
# the extension created.  %conf adds postgresql.conf settings.
sub outbox_node
{
	my ($name, $broker, %conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $settings = "shared_preload_libraries = 'outbox'\n"
	  . "outbox.brokers = '$broker->{bootstrap}'\n"
	  . "log_min_messages = 'log'\n";
	$settings .= "$_ = '$conf{$_}'\n" for sort keys %conf;
	$node->append_conf('postgresql.conf', $settings);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION outbox');
	return $node;
}

# Every record of $topic, in (partition, offset) order: hashes with
# partition, offset, key, payload (undef for a tombstone), headers and
# timestamp (milliseconds since the Unix epoch, as the record carries it).
sub kafka_read
{
	my ($broker, $topic) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'kcat', '-C', '-q', '-e', '-Z',
			'-b', $broker->{bootstrap},
			'-t', $topic,
			'-f', "%p\x1f%o\x1f%k\x1f%S\x1f%h\x1f%T\x1f%s\x1e"
		],
		'>', \$out, '2>', \$err);
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
	return [ sort { $a->{partition} <=> $b->{partition}
			  || $a->{offset} <=> $b->{offset} } @records ];
}

# Every record of $topic, in (partition, offset) order, as kcat -J gives
# it: hashes with partition, offset, key and payload (undef when null, as
# text), headers (a list of name, value, name, value..., in order) and ts
# (the timestamp, milliseconds since the Unix epoch).  Keys and headers
# whose values hold commas or equal signs read right this way.
sub kafka_read_json
{
	my ($broker, $topic) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'kcat', '-C', '-q', '-e', '-J',
			'-b', $broker->{bootstrap},
			'-t', $topic
		],
		'>', \$out, '2>', \$err);
	my $json = JSON::PP->new->utf8;
	my @records = map { $json->decode($_) } grep { /\S/ } split /\n/, $out;
	return [ sort { $a->{partition} <=> $b->{partition}
			  || $a->{offset} <=> $b->{offset} } @records ];
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
