
# The schema registry client (src/kafka/registry.c) against the test
# registry (test/schema_registry.js): schemas registered and fetched, with
# basic auth from the properties file, cached per process; the registry's
# refusals passed through; a registry down, or one whose answers are
# hostile (malformed, too large, too slow), makes an error that names it,
# never a crash or a hang.  The C API is called through a module of the
# tests (test/registry_probe.so); outbox_registry_check() is the product's.
# The credentials show nowhere a role could read them, and the worker, which
# reads the same properties file, skips them.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $no_avsc = node_module_unavailable('avsc@5');
plan skip_all => "the test schema registry needs avsc: $no_avsc" if $no_avsc;

my $root = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $registry = start_schema_registry(user => 'outbox:Secret-registry');
my $dir = PostgreSQL::Test::Utils::tempdir;

# the registry's credentials beside the Kafka properties the worker takes
my $properties = write_file("$dir/kafka.properties", 0600,
	"client.id=registry-test\n"
	  . "schema.registry.basic.auth.user.info = outbox:Secret-registry\n");

my ($node, $broker) = outbox_node_with_broker(
	'registry',
	'outbox.poll_interval' => '100ms',
	'outbox.schema_registry_url' => $registry->{url},
	'outbox.kafka_properties_file' => $properties);
$node->safe_psql('postgres', "
	CREATE FUNCTION registry_register(text, text) RETURNS integer
		AS '$root/test/registry_probe.so', 'registry_probe_register' LANGUAGE C STRICT;
	CREATE FUNCTION registry_schema(integer) RETURNS text
		AS '$root/test/registry_probe.so', 'registry_probe_schema' LANGUAGE C STRICT;
	CREATE FUNCTION registry_frame(integer) RETURNS bytea
		AS '$root/test/registry_probe.so', 'registry_probe_frame' LANGUAGE C STRICT;
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION outbox_worker_status() TO app");

# Run $sql (statements separated by newlines) in one session; the SQLSTATE
# and text of its error, or an empty SQLSTATE and the output.
sub run_sql
{
	my ($sql, %opts) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", %opts);
	return ('', $out) if $ret == 0;
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	return ($state // '?', $err);
}

my $v1 = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}';
my $v2 = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, '
  . '{"name": "note", "type": ["null", "string"], "default": null}]}';
my $bad = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, '
  . '{"name": "total", "type": "double"}]}';

# --- the registry answers, with basic auth from the properties file
is( $node->safe_psql('postgres', 'SELECT outbox_registry_check()'),
	qq{the schema registry at "$registry->{url}" answers, compatibility BACKWARD},
	'outbox_registry_check: the URL and the compatibility level');

# --- register: the registry's id; the same schema again costs no request
my $before = $registry->requests;
my ($state, $out) = run_sql("
	SELECT registry_register('orders-value', '$v1');
	SELECT registry_register('orders-value', '$v1');
	SELECT registry_frame(registry_register('orders-value', '$v1'))");
is($state, '', 'a schema registered') or diag($out);
is($out, "1\n1\n\\x0000000001", 'its id, the same each time; the wire-format prefix');
my $after = $registry->requests;
is($after->{'POST /subjects/orders-value/versions'}, 1,
	'registered once: a second register of the same schema makes no request');
is($after->{total} - $before->{total}, 1, 'and no other request either');

# the same schema under another subject: the registry's id for it, again
is($node->safe_psql('postgres', "SELECT registry_register('refunds-value', '$v1')"),
	'1', 'ids are the registry\'s: the same schema under another subject has the same id');
my $list = $registry->http('GET', '/subjects/orders-value/versions');
is($list->{content}, '[1]', 'the registry holds one version of the subject');

# --- a new version that old data can be read with: a new id
is($node->safe_psql('postgres', "SELECT registry_register('orders-value', '$v2')"),
	'2', 'a compatible new version registered');

# --- a refusal: the registry's own message, 22023
($state, $out) = run_sql("SELECT registry_register('orders-value', '$bad')");
is($state, '22023', 'an incompatible schema is refused with 22023');
like(
	$out,
	qr/the schema registry at "\Q$registry->{url}\E" refused the schema of subject "orders-value"\n.*DETAIL:  Schema being registered is incompatible with an earlier schema for subject "orders-value", details: \[the new schema cannot read data of version 2: .*total/s,
	'its message names the registry and the subject, the registry\'s message in the detail');
($state, $out) = run_sql("SELECT registry_register('orders-value', '{\"type\": \"recrod\"}')");
like($out, qr/DETAIL:  Invalid schema .*recrod/, 'an invalid schema: the registry\'s message');
is($state, '22023', 'with 22023');

# --- a schema by id: fetched once per process, from the registry
$before = $registry->requests;
($state, $out) = run_sql("
	SELECT registry_schema(2);
	SELECT registry_schema(2) = registry_schema(2)");
is($state, '', 'a schema fetched by id') or diag($out);
my ($schema, $same) = split /\n/, $out;
like($schema, qr/^\{"type":"record","name":"Order","fields":\[\{"name":"id","type":"long"\},\{"name":"note"/,
	'the schema, as the registry keeps it');
is($same, 't', 'the same again');
is($registry->requests->{'GET /schemas/ids/2'} // 0, ($before->{'GET /schemas/ids/2'} // 0) + 1,
	'fetched from the registry once');
($state, $out) = run_sql('SELECT registry_schema(99)');
is($state, '22023', 'an id the registry does not have: 22023');
like($out, qr/refused schema id 99\n.*DETAIL:  Schema 99 not found/s, 'with the registry\'s message');

# --- credentials: from the properties file only; without them, refused
($state, $out) = run_sql("
	SET outbox.kafka_properties_file = '';
	SELECT outbox_registry_check()");
is($state, '28000', 'without credentials the registry refuses: 28000');
like($out, qr/refused a look at its configuration: HTTP 401.*HINT:  Its credentials are schema.registry.basic.auth.user.info/s,
	'saying where credentials go');
my $wrong = write_file("$dir/wrong.properties", 0600,
	"schema.registry.basic.auth.user.info=outbox:Wrong-password\n");
($state, $out) = run_sql("
	SET outbox.kafka_properties_file = '$wrong';
	SELECT outbox_registry_check()");
is($state, '28000', 'wrong credentials: 28000');
unlike($out, qr/Wrong-password|Secret-registry/, 'no message shows a password');
my $typo = write_file("$dir/typo.properties", 0600,
	"client.id=x\nschema.registry.basic.auth.userinfo=outbox:Secret-typo\n");
($state, $out) = run_sql("
	SET outbox.kafka_properties_file = '$typo';
	SELECT outbox_registry_check()");
is($state, 'F0000', 'an unknown schema.registry property is refused');
like($out, qr/unknown schema registry property "schema.registry.basic.auth.userinfo" in file ".*typo.properties", line 2/,
	'naming it, the file and the line');
unlike($out, qr/Secret-typo/, 'not its value');

# the credentials show nowhere: settings, the worker's status, as any role
my $seen = $node->safe_psql('postgres', "
	SELECT string_agg(setting, ' ') FROM pg_settings WHERE name LIKE 'outbox.%';
	SELECT string_agg(s::text, ' ') FROM outbox_worker_status() s", extra_params => [ '-U', 'app' ]);
unlike($seen, qr/Secret-registry/, 'no setting nor the worker\'s status shows the password');

# --- the worker reads the same file: the schema.registry.* lines are
# skipped, the rest taken
$node->safe_psql('postgres', "SELECT outbox_enqueue('registry.worker', 'k', 'v')");
my $records = wait_for_records($broker, 'registry.worker', 1);
is(scalar @$records, 1, 'the worker publishes with the properties file of the registry');
is($node->safe_psql('postgres', "SELECT last_error IS NULL FROM outbox_worker_status()"),
	't', 'and refuses nothing of it');
($state, $out) = run_sql("ALTER SYSTEM SET outbox.kafka_properties_file = '$properties'");
is($state, '', 'the setting of the file takes it');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET outbox.kafka_properties_file');

# --- TLS: the registry's CA, and a client certificate whose key has a
# password, from the properties file
sub openssl
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'openssl', @_ ], '>', \$out, '2>', \$err)
	  or die "openssl @_: $err";
	return;
}
openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
	'-subj', '/CN=outbox test CA', '-keyout', "$dir/ca.key", '-out', "$dir/ca.crt");
write_file("$dir/server.ext", 0600, "subjectAltName=IP:127.0.0.1\n");
for my $who ('server', 'client')
{
	openssl('req', '-newkey', 'rsa:2048', '-subj', "/CN=$who",
		$who eq 'server' ? '-nodes' : ('-passout', 'pass:Secret-key'),
		'-keyout', "$dir/$who.key", '-out', "$dir/$who.csr");
	openssl('x509', '-req', '-days', '2', '-in', "$dir/$who.csr",
		'-CA', "$dir/ca.crt", '-CAkey', "$dir/ca.key", '-CAcreateserial',
		$who eq 'server' ? ('-extfile', "$dir/server.ext") : (),
		'-out', "$dir/$who.crt");
}
my $tls_registry = start_schema_registry(
	tls => "$dir/server.crt,$dir/server.key",
	client_ca => "$dir/ca.crt");
like($tls_registry->{url}, qr/^https:/, 'a registry over TLS');
my %tls = (
	ca => "schema.registry.ssl.ca.location=$dir/ca.crt\n",
	certificate => "schema.registry.ssl.certificate.location=$dir/client.crt\n",
	key => "schema.registry.ssl.key.location=$dir/client.key\n",
	password => "schema.registry.ssl.key.password=Secret-key\n");
# outbox_registry_check() with the properties file of those lines
sub check_tls
{
	my $file = write_file("$dir/tls.properties", 0600, join('', @tls{@_}));
	return run_sql("
		SET outbox.schema_registry_url = '$tls_registry->{url}';
		SET outbox.kafka_properties_file = '$file';
		SELECT outbox_registry_check()");
}
($state, $out) = check_tls(qw(ca certificate key password));
is($out, qq{the schema registry at "$tls_registry->{url}" answers, compatibility BACKWARD},
	'TLS: the CA, the client certificate, its key and its password from the file');
($state, $out) = check_tls(qw(certificate key password));
is($state, '08006', 'TLS: without the CA, the registry is not trusted');
like($out, qr/could not reach the schema registry at "\Q$tls_registry->{url}\E"\nDETAIL:  .*certificate/,
	'saying so');
($state, $out) = check_tls(qw(ca));
is($state, '08006', 'TLS: without a client certificate, the registry refuses');
($state, $out) = check_tls(qw(ca certificate key));
is($state, '08006', 'TLS: the key without its password cannot be used');
$tls{password} = "schema.registry.ssl.key.password=Wrong-key\n";
($state, $out) = check_tls(qw(ca certificate key password));
is($state, '08006', 'TLS: nor with a wrong one');
unlike($out, qr/Wrong-key|Secret-key/, 'no message shows it');
$tls_registry->stop;

# --- the registry down: 08006 naming the URL; up again, it serves
$registry->down;
($state, $out) = run_sql("SELECT registry_register('down-value', '$v1')");
is($state, '08006', 'the registry down: 08006');
like($out, qr/could not reach the schema registry at "\Q$registry->{url}\E"\nDETAIL:  .*onnect/,
	'naming the registry, and why');
$registry->up;
is($node->safe_psql('postgres', "SELECT registry_register('down-value', '$v1')"),
	'1', 'up again, it serves');

# --- hostile answers: errors, the backend alive
$registry->next_answer(status => 200, body => '{"id": [1, ');
($state, $out) = run_sql("SELECT registry_register('hostile-value', '$v1')");
is($state, '08P01', 'malformed JSON: 08P01');
like($out, qr/gave an answer to the schema of subject "hostile-value" that is not a JSON object/,
	'saying so');
$registry->next_answer(status => 200, body => '{"id": "one"}');
($state, $out) = run_sql("SELECT registry_register('hostile-value', '$v1')");
like($out, qr/gave no schema id in its answer/, 'an id that is no number: refused');
$registry->next_answer(status => 200, body => '{"id": 2147483648}');
($state, $out) = run_sql("SELECT registry_register('hostile-value', '$v1')");
like($out, qr/gave no schema id in its answer/, 'an id out of range: refused');
$registry->next_answer(status => 200, body => 'x' x 1024, repeat => 9 * 1024);
($state, $out) = run_sql("SELECT registry_register('hostile-value', '$v1')");
is($state, '08P01', 'an answer larger than 8 MB: 08P01');
like($out, qr/gave an answer larger than 8388608 bytes/, 'saying so');
$registry->next_answer(status => 500, body => '{"error_code": 50001, "message": "Error in the backend data store"}');
($state, $out) = run_sql("SELECT registry_register('hostile-value', '$v1')");
is($state, '08006', 'a registry that fails: 08006');
like($out, qr/failed the schema of subject "hostile-value": HTTP 500\nDETAIL:  Error in the backend data store/,
	'with its status and message');

# a registry that does not answer: the request times out, or is cancelled
$registry->next_answer(status => 200, body => '{"id": 1}', delay_ms => 60000);
($state, $out) = run_sql("SELECT registry_register('slow-value', '$v1')");
is($state, '08006', 'no answer: the request times out, 08006');
like($out, qr/DETAIL:  .*[Tt]imed? ?out/, 'saying so');
$registry->next_answer(status => 200, body => '{"id": 1}', delay_ms => 60000);
($state, $out) = run_sql("
	SET statement_timeout = '1s';
	SELECT registry_register('slow-value', '$v1')");
is($state, '57014', 'statement_timeout cancels a request');
is($node->safe_psql('postgres', "SELECT registry_register('slow-value', '$v1')"),
	'1', 'the registry serves the next request');
ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is up');

done_testing();
