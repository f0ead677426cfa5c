
# Kafka properties: outbox.kafka_properties takes only the librdkafka
# producer properties known to be safe and says why it refuses the others,
# never echoing a value; secrets are never stored where another role can
# read them (not per database, per role or per function), only in
# postgresql.conf or in the file that outbox.kafka_properties_file names,
# which a database may have its own of, for its own cluster.  The server
# logs as it does by default: no statements, errors with their statement
# (so the values refused through ALTER SYSTEM below hold no secret; the
# statements that refuse a secret keep themselves out of the log).

use strict;
use warnings;

use OutboxTest;
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;

my ($node, $broker) = outbox_node_with_broker(
	'properties',
	'outbox.poll_interval' => '100ms',
	'log_statement' => 'none',
	'log_min_messages' => 'warning',
	# a secret in postgresql.conf, unused without TLS
	'outbox.kafka_properties' => 'client.id=main;ssl.key.password=Secret-conf');
my $shop_broker = start_broker(1);
my $dir = PostgreSQL::Test::Utils::tempdir;

# Run $sql in $db as the superuser; the SQLSTATE and text of its error, or
# an empty SQLSTATE if it succeeded.
sub error_of
{
	my ($sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres', "\\set VERBOSITY verbose\n$sql");
	return ('', '') if $ret == 0;
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	return ($state // '?', $err);
}

# Does an error text echo the value of property $name?  A short value is
# looked for where it would show, a long one anywhere as a word of its own.
sub echoes
{
	my ($err, $name, $value) = @_;
	return $err =~ /\Q$name=$value\E|"\Q$value\E"/
	  || (length($value) > 5 && $err =~ /(?<![\w.])\Q$value\E(?![\w.])/);
}

# Wait until last_error of the worker of $db is like $pattern (SQL LIKE),
# or NULL if $pattern is undef.
sub wait_for_last_error
{
	my ($db, $pattern) = @_;
	my $test = defined $pattern ? "LIKE '$pattern'" : 'IS NULL';
	return wait_for_sql($node,
		"SELECT last_error $test FROM outbox_worker_status() WHERE database = '$db'");
}

# --- an allow-list: what is not known to be safe is refused, with why
my @refused = (
	[ 'sasl.kerberos.kinit.cmd', 'touch /tmp/outbox-kinit-ran', qr/runs a shell command/ ],
	[ 'ssl.providers', 'legacy', qr/loads .* into the server/ ],
	[ 'ssl.engine.location', '/tmp/evil.so', qr/loads .* into the server/ ],
	[ 'plugin.library.paths', '/tmp/evil.so', qr/loads .* into the server/ ],
	[ 'enable.idempotence', 'false', qr/Order per key/ ],
	[ 'acks', '1', qr/Durability/ ],
	[ 'linger.ms', '0', qr/one request per partition/ ],
	[ 'queuing.strategy', 'lifo', qr/Order per key/ ],
	[ 'message.timeout.ms', '100', qr/Set outbox.delivery_timeout instead/ ],
	[ 'bootstrap.servers', 'elsewhere:9092', qr/Set outbox.brokers instead/ ],
	[
		'no.such.property', 'x',
		qr/not one of the librdkafka producer properties.*HINT:  .*kafka-properties.md/s
	],
	[
		'topic.blacklist', 'orders.*',
		qr/not one of the librdkafka producer properties.*HINT:  .*kafka-properties.md/s
	]);
for my $case (@refused)
{
	my ($name, $value, $why) = @$case;
	my ($state, $err) = error_of(
		"ALTER SYSTEM SET outbox.kafka_properties = 'client.id=x;$name=$value'");
	is($state, '22023', "$name is refused with 22023");
	like($err, qr/Kafka property "\Q$name\E" is not allowed in outbox.kafka_properties/,
		"$name: the message names it");
	like($err, $why, "$name: and says why");
	ok(!echoes($err, $name, $value), "$name: without echoing its value");
}

# values that would break a guarantee or reach a shell
my @bad_values = (
	[ 'partitioner', 'random', qr/sends a key to one partition/ ],
	[ 'debug', 'all', qr/can log the values of properties/ ],
	[ 'sasl.kerberos.principal', 'me$(touch /tmp/outbox-principal)', qr/shell command that runs kinit/ ],
	[ 'compression.type', 'sometimes', qr/librdkafka does not accept the value/ ]);
for my $case (@bad_values)
{
	my ($name, $value, $why) = @$case;
	my ($state, $err) = error_of("ALTER SYSTEM SET outbox.kafka_properties = '$name=$value'");
	is($state, '22023', "$name=<bad value> is refused with 22023");
	like($err, qr/invalid value for Kafka property "\Q$name\E"/, "$name: the message names it");
	like($err, $why, "$name: and says why");
	ok(!echoes($err, $name, $value), "$name: without echoing the value");
}

my ($state, $err) = error_of(
	"ALTER SYSTEM SET outbox.kafka_properties = 'client.id=x; compression.type=lz4; compression.level=4; "
	  . "socket.keepalive.enable=true; request.timeout.ms=5000; retry.backoff.ms=200; "
	  . "reconnect.backoff.ms=50; broker.address.family=v4; topic.metadata.refresh.interval.ms=60000; "
	  . "partitioner=murmur2; socket.nagle.disable=true; security.protocol=plaintext; "
	  . "ssl.endpoint.identification.algorithm=none; debug=broker,topic; "
	  . "sasl.kerberos.principal=kafkaclient/host.example.com\@EXAMPLE.COM'");
is($state, '', 'the properties known to be safe are taken') or diag($err);
$node->safe_psql('postgres', 'ALTER SYSTEM RESET outbox.kafka_properties');

# --- secrets: never per database, per role or per function
my @stores = (
	"ALTER DATABASE postgres SET outbox.kafka_properties = 'client.id=db;sasl.password=Secret-db'",
	"ALTER ROLE CURRENT_USER SET outbox.kafka_properties = 'sasl.password=Secret-role'",
	"ALTER ROLE ALL SET outbox.kafka_properties = 'ssl.key.password=Secret-all'",
	"ALTER ROLE CURRENT_USER IN DATABASE postgres SET outbox.kafka_properties = 'sasl.oauthbearer.client.secret=Secret-dbrole'",
	"CREATE FUNCTION leaky() RETURNS int LANGUAGE sql SET outbox.kafka_properties = 'ssl.keystore.password=Secret-fn' AS 'SELECT 1'"
);
for my $sql (@stores)
{
	my ($verb) = $sql =~ /^(\w+ \w+)/;
	($state, $err) = error_of($sql);
	is($state, '22023', "$verb: a secret is refused with 22023");
	like(
		$err,
		qr/cannot be set per database, per role or per function.*DETAIL:  .*every role can read.*HINT:  .*outbox.kafka_properties_file/s,
		"$verb: saying where it can go");
	unlike($err, qr/Secret-/, "$verb: without echoing it");
}
($state, $err) = error_of(
	"ALTER DATABASE postgres SET outbox.kafka_properties = 'client.id=outbox-postgres'");
is($state, '', 'properties that are no secret may be set per database') or diag($err);
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET outbox.kafka_properties');

# --- a database with its own cluster and credentials, in its own file
$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', 'CREATE EXTENSION outbox');
my $shop_file = write_file("$dir/shop.properties", 0600,
	"# the shop's own cluster\nclient.id = shop-outbox\n\nssl.key.password = Secret-shop\n");

# a bad file is refused when it is set, naming the file and the line
write_file("$dir/open.properties", 0644, "client.id=open\n");
($state, $err) = error_of(
	"ALTER DATABASE shop SET outbox.kafka_properties_file = '$dir/open.properties'");
is($state, '22023', 'a properties file that other users can read is refused');
like($err, qr/Kafka properties file ".*open.properties" is accessible by other users/,
	'saying so');
write_file("$dir/kinit.properties", 0600,
	"client.id=x\n# a comment\nsasl.kerberos.kinit.cmd = touch /tmp/outbox-kinit-ran\n");
($state, $err) = error_of(
	"ALTER DATABASE shop SET outbox.kafka_properties_file = '$dir/kinit.properties'");
is($state, '22023', 'a file with a refused property is refused');
like(
	$err,
	qr/Kafka property "sasl.kerberos.kinit.cmd" is not allowed in file ".*kinit.properties", line 3/,
	'naming the property, the file and the line');
unlike($err, qr/touch/, 'not the value');
write_file("$dir/syntax.properties", 0600, "client.id=x\nSecret-bare\n");
($state, $err) = error_of(
	"ALTER DATABASE shop SET outbox.kafka_properties_file = '$dir/syntax.properties'");
like($err, qr/invalid Kafka property in file ".*syntax.properties", line 2/,
	'a line that is no name=value is refused by its number');
unlike($err, qr/Secret-/, 'not by its text');
# a file that does not exist yet only earns a notice, as for a schema in
# search_path
my ($ret, $out, $notice) = $node->psql('postgres',
	"ALTER DATABASE shop SET outbox.kafka_properties_file = '$dir/missing.properties'");
is($ret, 0, 'a file that does not exist yet is taken');
like($notice, qr/NOTICE:  could not open Kafka properties file ".*missing.properties"/,
	'with a notice');
# by ALTER SYSTEM and SET too, where a mistyped path or a file open to
# other users is refused at once
($state, $err) = error_of(
	"ALTER SYSTEM SET outbox.kafka_properties_file = '$dir/typo.properties'");
is($state, '22023', 'ALTER SYSTEM with a file that does not exist is refused');
like($err, qr/could not open Kafka properties file ".*typo.properties"/, 'naming the file');
($state, $err) = error_of(
	"ALTER SYSTEM SET outbox.kafka_properties_file = '$dir/open.properties'");
like($err, qr/Kafka properties file ".*open.properties" is accessible by other users/,
	'ALTER SYSTEM with a file other users can read is refused');
($state, $err) = error_of("SET outbox.kafka_properties_file = '$dir/typo.properties'");
is($state, '22023', 'so is SET');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_file_settings WHERE name ~ \'^outbox\.kafka_properties_file\''),
	'0', 'and nothing reached postgresql.auto.conf');

$node->safe_psql('postgres',
	"ALTER DATABASE shop SET outbox.brokers = '$shop_broker->{bootstrap}'");
($state, $err) =
  error_of("ALTER DATABASE shop SET outbox.kafka_properties_file = '$shop_file'");
is($state, '', 'the shop\'s file is set for the shop\'s database') or diag($err);
$node->safe_psql('shop', "SELECT outbox_enqueue('shop.t', 's' || i, key => 'k') FROM generate_series(1, 3) i");
is(scalar @{ wait_for_records($shop_broker, 'shop.t', 3, 30) },
	3, 'the shop\'s events reach its own cluster, with its file\'s properties');
$node->safe_psql('postgres', "SELECT outbox_enqueue('main.t', 'm'::text)");
is(scalar @{ wait_for_records($broker, 'main.t', 1, 30) },
	1, 'the other database still publishes to the main cluster');

# the file's properties reach the producer: SASL credentials, which the
# mock cluster has no support for, make the producer try to authenticate
$node->safe_psql('postgres', 'CREATE DATABASE vault');
$node->safe_psql('vault', 'CREATE EXTENSION outbox');
my $vault_file = write_file("$dir/vault.properties", 0600,
	"security.protocol=sasl_plaintext\nsasl.mechanism=PLAIN\nsasl.username=vault\nsasl.password=Secret-sasl\n");
$node->safe_psql('postgres',
	"ALTER DATABASE vault SET outbox.kafka_properties_file = '$vault_file'");
$node->safe_psql('vault', "SELECT outbox_enqueue('vault.t', 'v'::text)");
ok($node->wait_for_log(qr/SASL/), 'the file\'s SASL properties reached the producer');
ok( wait_for_sql(
		$node,
		"SELECT state = 'broker unreachable' FROM outbox_worker_status() WHERE database = 'vault'"),
	'the broker refuses it: the worker says so');

# --- a changed file: taken when it can be used, else the producer is kept
write_file($shop_file, 0600,
	"client.id = shop-outbox\nsasl.kerberos.kinit.cmd = touch /tmp/outbox-kinit-ran\n");
ok($node->wait_for_log(qr/Kafka property "sasl.kerberos.kinit.cmd" is not allowed in file ".*shop.properties", line 2/),
	'a bad edit of the file is reported');
$node->safe_psql('shop', "SELECT outbox_enqueue('shop.t', 's4'::text, key => 'k')");
is(scalar @{ wait_for_records($shop_broker, 'shop.t', 4, 30) },
	4, 'and the shop keeps publishing with what the file said before');
ok(wait_for_last_error('shop', q{Kafka property "sasl.kerberos.kinit.cmd" is not allowed in file "%shop.properties", line 2; the producer keeps its settings}),
	'and outbox_worker_status() says so while it publishes');
write_file($shop_file, 0600, "client.id = shop-outbox-2\nssl.key.password = Secret-shop\n");
ok($node->wait_for_log(qr/Kafka properties file ".*shop.properties" changed, rebuilding the producer/),
	'a good edit rebuilds the producer');
$node->safe_psql('shop', "SELECT outbox_enqueue('shop.t', 's5'::text, key => 'k')");
is(scalar @{ wait_for_records($shop_broker, 'shop.t', 5, 30) }, 5, 'which publishes');
ok(wait_for_last_error('shop', undef),
	'and the status no longer says the file is refused');

# a file whose permissions are widened is the same mistake: the producer
# keeps its settings, and the status says why
chmod 0644, $shop_file;
ok(wait_for_last_error('shop', q{Kafka properties file "%shop.properties" is accessible by other users; the producer keeps its settings}),
	'a file opened to other users is refused, in outbox_worker_status()');
$node->safe_psql('shop', "SELECT outbox_enqueue('shop.t', 's6'::text, key => 'k')");
is(scalar @{ wait_for_records($shop_broker, 'shop.t', 6, 30) },
	6, 'and the shop keeps publishing');
chmod 0600, $shop_file;
ok(wait_for_last_error('shop', undef),
	'closed again, it is taken');

# postgresql.conf edited by hand with a mistyped path, then a reload: the
# worker keeps its producer, and says why
$node->safe_psql('postgres', "SELECT outbox_enqueue('main2.t', 'a'::text)");
wait_for_records($broker, 'main2.t', 1, 30);
my $main_pid = $node->safe_psql('postgres',
	"SELECT pid FROM outbox_worker_status() WHERE database = 'postgres'");
$node->append_conf('postgresql.conf', "outbox.kafka_properties_file = '$dir/typo.properties'");
$node->reload;
ok(wait_for_last_error('postgres', q{could not open Kafka properties file "%typo.properties"%; the producer keeps its settings}),
	'a mistyped path in postgresql.conf: outbox_worker_status() says the file cannot be used');
$node->safe_psql('postgres', "SELECT outbox_enqueue('main2.t', 'b'::text)");
is(scalar @{ wait_for_records($broker, 'main2.t', 2, 30) },
	2, 'and the worker keeps publishing with the settings it had');
is( $node->safe_psql('postgres',
		"SELECT pid FROM outbox_worker_status() WHERE database = 'postgres'"),
	$main_pid, 'the same worker');
$node->append_conf('postgresql.conf', "outbox.kafka_properties_file = ''");
$node->reload;
ok(wait_for_last_error('postgres', undef),
	'mended, the status says nothing more');
ok(!-e '/tmp/outbox-kinit-ran' && !-e '/tmp/outbox-principal', 'no command ever ran');

# a worker that starts with a bad file says why, naming file and line
write_file($vault_file, 0600, "client.id=vault\nssl.key.password\n");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM outbox_worker_status() WHERE database = 'vault'");
ok(wait_for_last_error('vault', q{invalid Kafka property in file "%vault.properties", line 2; its topics wait}),
	'a worker that cannot use its file says why in outbox_worker_status()');

# --- a file is never waited for: a named pipe at the path of a topic's
# properties file is refused without being read, that cluster's topics
# wait and the others go on
$node->safe_psql('postgres', 'CREATE DATABASE pipes');
$node->safe_psql('pipes', 'CREATE EXTENSION outbox');
my $later = "$dir/later.properties";
($ret, $out, $notice) = $node->psql('pipes',
	"SELECT outbox_set_topic('ff.*', '$shop_broker->{bootstrap}', '$later')");
like($notice, qr/NOTICE:  could not open Kafka properties file ".*later.properties"/,
	'a topic\'s properties file that does not exist yet earns a notice');
POSIX::mkfifo($later, 0600) or die "mkfifo: $!";
$node->safe_psql('pipes', "SELECT outbox_enqueue('ff.t', 'f1'::text, key => 'f')");
$node->safe_psql('pipes',
	"SELECT outbox_enqueue('pipes.t', 'p' || i, key => 'p') FROM generate_series(1, 10) i");
is(scalar @{ wait_for_records($broker, 'pipes.t', 10, 30) },
	10, 'a named pipe at the path of a topic\'s properties file: the other cluster publishes');
ok( wait_for_last_error(
		'pipes', q{Kafka properties file "%later.properties" is not a regular file; its topics wait}),
	'and outbox_worker_status() says why the topic waits');
is( $node->safe_psql(
		'pipes',
		"SELECT state FROM outbox_cluster_status() WHERE database = 'pipes' AND brokers = '$shop_broker->{bootstrap}'"),
	'unreachable',
	'outbox_cluster_status() shows its cluster as one whose topics wait');
ok($node->log_contains(qr/Kafka properties file ".*later.properties" cannot be used, its topics wait/),
	'the log says so');
my $pipes_pid = $node->safe_psql('postgres',
	"SELECT pid FROM outbox_worker_status() WHERE database = 'pipes'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pipes_pid)");
ok( wait_for_sql(
		$node,
		"SELECT pid IS NOT NULL AND pid <> $pipes_pid FROM outbox_worker_status() WHERE database = 'pipes'"),
	'pg_terminate_backend() ends the worker, which is started again');
unlink $later;
write_file($later, 0600, "client.id=later\n");
is(scalar @{ wait_for_records($shop_broker, 'ff.t', 1, 30) },
	1, 'a regular file in its place: the topic\'s event follows');
ok(wait_for_last_error('pipes', undef), 'and the status no longer says it waits');

# the schema registry's credentials are read by application backends: a
# named pipe there is an error, at once, with no timeout set
my $creds = "$dir/creds.properties";
write_file($creds, 0600, "schema.registry.basic.auth.user.info=u:Secret-pipe\n");
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE reader LOGIN;
	GRANT EXECUTE ON FUNCTION outbox_registry_check() TO reader;
	ALTER ROLE reader SET outbox.kafka_properties_file = '$creds';
	ALTER ROLE reader SET outbox.schema_registry_url = 'http://127.0.0.1:1';
	ALTER ROLE reader SET statement_timeout = 0});
unlink $creds;
POSIX::mkfifo($creds, 0600) or die "mkfifo: $!";
my $timed_out = 0;
($ret, $out, $err) = $node->psql(
	'postgres', "\\set VERBOSITY verbose\nSELECT outbox_registry_check()",
	extra_params => [ '-U', 'reader' ],
	timeout => 60,
	timed_out => \$timed_out);
ok(!$timed_out, 'the registry\'s credentials at a named pipe: no wait');
like(
	$err,
	qr/ERROR:  F0000: Kafka properties file ".*creds.properties" is not a regular file\nDETAIL:  It is a named pipe/,
	'but an error that says so');
# nor is a CA, certificate or key of the registry that libcurl would open
unlink $creds;
POSIX::mkfifo("$dir/ca.pem", 0600) or die "mkfifo: $!";
write_file($creds, 0600, "schema.registry.ssl.ca.location=$dir/ca.pem\n");
$node->safe_psql('postgres',
	"ALTER ROLE reader SET outbox.schema_registry_url = 'https://127.0.0.1:1'");
($ret, $out, $err) = $node->psql(
	'postgres', "\\set VERBOSITY verbose\nSELECT outbox_registry_check()",
	extra_params => [ '-U', 'reader' ],
	timeout => 60);
like(
	$err,
	qr/ERROR:  F0000: invalid schema registry property "schema.registry.ssl.ca.location" in file ".*creds.properties", line 1\nDETAIL:  It names a named pipe/,
	'a CA of the registry that is a named pipe is refused');

# --- what a plain role can read holds no secret
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
for my $db (qw(postgres shop vault))
{
	$node->safe_psql($db, 'GRANT EXECUTE ON FUNCTION outbox_worker_status() TO plain');
	my $seen = $node->safe_psql(
		$db, q{
		SELECT concat_ws(' ',
			(SELECT string_agg(array_to_string(setconfig, ' '), ' ') FROM pg_db_role_setting),
			(SELECT string_agg(array_to_string(proconfig, ' '), ' ') FROM pg_proc),
			(SELECT string_agg(name || '=' || coalesce(setting, ''), ' ') FROM pg_settings),
			(SELECT string_agg(concat_ws(' ', datname, usename, application_name,
										 backend_type, wait_event, state, query), ' ')
			   FROM pg_stat_activity),
			(SELECT string_agg(s::text, ' ') FROM outbox_worker_status() s))
	}, extra_params => [ '-U', 'plain' ]);
	unlike($seen, qr/Secret-/,
		"$db: no secret in pg_db_role_setting, pg_proc, pg_settings, pg_stat_activity or outbox_worker_status()");
	like($seen, qr/outbox.kafka_properties_file=/, "$db: the file's name is no secret");
	for my $read ('SHOW outbox.kafka_properties',
		"SELECT current_setting('outbox.kafka_properties')")
	{
		my ($ret, $out, $stderr) =
		  $node->psql($db, $read, extra_params => [ '-U', 'plain' ]);
		like($stderr, qr/must be superuser or have privileges of pg_read_all_settings/,
			"$db: $read is refused");
	}
}
unlike(slurp_file($node->logfile), qr/Secret-/, 'the server log holds no secret');

$node->stop;
$broker->stop;
$shop_broker->stop;
done_testing();
