
# The test tools as a user runs them, from the README and their --help:
# test/mock_broker's usage, its control FIFO (an outage drill: down -1, a
# produce fails, up -1, it succeeds), a broker started in the background
# of an interactive shell (not stopped by SIGTTIN); test/schema_registry
# from a copy without node_modules, installing what it needs; the BigInt
# hook of docs/avro.md, run against it.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $broker_program = "$root/test/mock_broker";
my $dir = PostgreSQL::Test::Utils::tempdir;

# Run @cmd with stdin from /dev/null; returns (exit status, stdout, stderr).
sub run_tool
{
	my @cmd = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout(60));
	return ($? >> 8, $out, $err);
}

# Produce one record to $topic of $bootstrap with kcat, giving up after 3
# seconds; true if it was delivered.
sub produce
{
	my ($bootstrap, $topic) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::run(
		[
			'kcat', '-P', '-b', $bootstrap, '-t', $topic,
			'-X', 'message.timeout.ms=3000'
		],
		'<', \"one\n", '>', \$out, '2>', \$err, IPC::Run::timeout(30));
}

# The lines of $file once it holds at least $lines of them, or after 30
# seconds those it holds.
sub lines_of
{
	my ($file, $lines) = @_;
	my @got;
	for (1 .. 300)
	{
		@got = -f $file ? split(/\n/, slurp_file($file)) : ();
		last if @got >= $lines;
		usleep(100_000);
	}
	return @got;
}

# --- usage
my ($status, $out, $err) = run_tool($broker_program, '--help');
is($status, 0, 'mock_broker --help exits 0');
like($out, qr/^Usage: mock_broker \[--control FIFO\] \[BROKERS\]\n.*down -1/ms,
	'and prints its usage, the outage drill included');
is($err, '', 'on stdout only');
for my $bad ([ 'x' ], [ '--control' ], [ '--bogus' ], [ '0' ], [ '2', '3' ])
{
	($status, $out, $err) = run_tool($broker_program, @$bad);
	is( "$status|$out|" . ($err =~ /^Usage: mock_broker/m ? 'usage' : $err),
		'2||usage', "mock_broker @$bad: the usage on stderr, exit 2");
}

# --- commands through the control FIFO, stdin /dev/null (a broker started
# with & by a script): the FIFO is made, an outage is taken and ended
my $fifo = "$dir/control";
my $log = "$dir/broker.out";
my $h = IPC::Run::start([ $broker_program, '--control', $fifo ],
	'<', '/dev/null', '>', $log, '2>', "$dir/broker.err");
my ($bootstrap) = lines_of($log, 1);
ok(-p $fifo, 'the control FIFO is made');
ok(produce($bootstrap, 'drill'), 'a record is produced');

# one command written to the FIFO, as echo 'CMD' > FIFO does; its reply
sub control
{
	my ($command, $reply_line) = @_;
	open(my $fh, '>', $fifo) or die "$fifo: $!";
	print $fh "$command\n";
	close($fh);
	return (lines_of($log, $reply_line))[ $reply_line - 1 ];
}
is(control('down -1', 2), 'ok', "'down -1' through the FIFO is answered ok");
ok(!produce($bootstrap, 'drill'), 'and no record can be produced: the cluster is down');
is(control('up -1', 3), 'ok', "'up -1' is answered ok");
ok(produce($bootstrap, 'drill'), 'and records are produced again');
is(scalar @{ kafka_read({ bootstrap => $bootstrap }, 'drill') },
	2, 'the topic holds the two records delivered');
is(control('up 7', 4), 'error: no such broker', 'a broker that does not exist is an error');
$h->signal('TERM');
ok($h->finish, 'SIGTERM stops the broker, exit 0');
ok(!-e $fifo, 'and the FIFO it made is gone');

# --- in the background of an interactive shell (job control on: its own
# process group, stdin the terminal), under a terminal that script(1)
# gives: not stopped by SIGTTIN, and served through the FIFO
SKIP:
{
	skip 'script(1) is not installed', 3
	  unless -x '/usr/bin/script';
	my $shell = qq{set -m; "$broker_program" --control "$fifo" > "$log" 2>&1 &
		sleep 2; ps -o stat= -p \$! > "$dir/stat"; echo \$! > "$dir/pid"; wait};
	local $ENV{SHELL} = '/bin/bash';    # script(1) runs $shell with it
	my $term = IPC::Run::start([ 'script', '-qec', $shell, '/dev/null' ],
		'<', \'', '>', \my $term_out, '2>', \my $term_err);
	my ($stat) = lines_of("$dir/stat", 1);
	unlike($stat, qr/^T/, "a broker started with & in a terminal runs (state $stat)");
	is(control('down 1', 2), 'ok', 'and takes commands through the FIFO');
	my ($pid) = lines_of("$dir/pid", 1);
	kill 'CONT', $pid;			# were it stopped
	kill 'TERM', $pid;
	$term->finish;
	ok(!-e $fifo, 'and stops on SIGTERM');
}

# --- the schema registry, from a copy of the repository without
# node_modules: --help, then the documented command installs what it
# needs and serves
my $copy = "$dir/copy";
mkdir $copy;
system("tar -C '$root' --exclude=node_modules -cf - test/schema_registry test/schema_registry.js t/drivers docs/avro.md"
	  . " | tar -C '$copy' -xf -") == 0
  or die 'copy failed';
SKIP:
{
	skip 'node is not installed', 6 if system('node --version >/dev/null 2>&1') != 0;
	($status, $out, $err) = run_tool("$copy/test/schema_registry", '--help');
	is($status, 0, 'test/schema_registry --help exits 0');
	like($out, qr/^Usage: test\/schema_registry .*^  down /ms, 'and prints its usage');
	ok(!-e "$copy/t/drivers/node_modules", 'installing nothing');

	my ($in, $url_out, $reg_err) = ('', '', '');
	my $reg = IPC::Run::start([ "$copy/test/schema_registry" ],
		\$in, \$url_out, \$reg_err, IPC::Run::timeout(300));
	$reg->pump until $url_out =~ /\n/ || !$reg->pumpable;
	my ($url) = $url_out =~ /^(http\S+)\n/;
	ok($url, 'test/schema_registry installs avsc and listens')
	  or diag($reg_err);
	my $res = HTTP::Tiny->new->post(
		"$url/subjects/drill-value/versions",
		{
			headers => { 'Content-Type' => 'application/vnd.schemaregistry.v1+json' },
			content => '{"schema": "\"string\""}'
		});
	is("$res->{status} $res->{content}", '200 {"id":1}', 'and registers a schema');

	# docs/avro.md's hook, run as it is there: longs past 2^53 that avsc
	# refuses without it, as BigInt with it, across two versions of a record
	($status, $out, $err) = run_tool('node', "$copy/t/drivers/avro_bigint.js",
		"$copy/docs/avro.md", $url);
	is( $out, "without the hook: potential precision loss\n" x 2
		  . "with the hook: bigint 9007199254740993\n"
		  . "with the hook: bigint -9007199254740995\n",
		"docs/avro.md's BigInt hook decodes longs past 2^53 $err");
	$reg->kill_kill;
}

done_testing();
