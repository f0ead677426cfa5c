
# Topics of format avro, against the test schema registry
# (test/schema_registry.js): outbox_set_topic registers the schemas under
# <topic>-value and <topic>-key, and refuses one the registry refuses;
# outbox_enqueue checks each jsonb payload against the value schema and
# stores it encoded in Confluent's wire format, refusing a mismatch with its
# field and type; a consumer with Confluent's deserializer
# (@kafkajs/confluent-schema-registry, avsc) reads every Avro type back; a
# registry that is down delays nothing already encoded and no enqueue, only
# a new schema.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use Time::HiRes;
use JSON::PP;
use Math::BigInt;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $no_avsc = node_module_unavailable('avsc@5');
plan skip_all => "the test schema registry needs avsc: $no_avsc" if $no_avsc;

my $drivers = File::Spec->rel2abs(dirname(__FILE__) . '/drivers');
my $registry = start_schema_registry();
my ($node, $broker) = outbox_node_with_broker(
	'avro',
	'outbox.poll_interval' => '100ms',
	'outbox.schema_registry_url' => $registry->{url});

# Run $sql; its SQLSTATE and error's detail, or '' and its output.
sub try_sql
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	return ('', $out) if $ret == 0;
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	my ($detail) = $err =~ /DETAIL:  (.*)/;
	return ($state // '?', $detail // $err);
}

my $order_schema = <<'EOF';
{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"},
  {"name": "qty", "type": "int"},
  {"name": "paid", "type": "boolean"},
  {"name": "weight", "type": "float"},
  {"name": "ratio", "type": "double"},
  {"name": "name", "type": "string"},
  {"name": "note", "type": ["null", "string"], "default": null},
  {"name": "ref", "type": ["null", "long", "string"]},
  {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "counts", "type": {"type": "map", "values": "long"}},
  {"name": "address", "type": ["null", {"type": "record", "name": "Address",
    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"]}]}]},
  {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line",
    "fields": [{"name": "sku", "type": "string"},
               {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}}},
  {"name": "total", "type": {"type": "fixed", "name": "Total", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "day", "type": {"type": "int", "logicalType": "date"}},
  {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
  {"name": "blob", "type": "bytes"},
  {"name": "channel", "type": "string", "default": "web"}
]}
EOF
my $key_schema =
  '{"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}';

$node->safe_psql('postgres', "
	SELECT outbox_set_topic('shop.orders', format => 'avro', value_schema => \$s\$$order_schema\$s\$,
							key_schema => '$key_schema');
	SELECT outbox_set_topic('shop.notes', format => 'avro',
							value_schema => '{\"type\": \"record\", \"name\": \"Note\", \"fields\": [{\"name\": \"text\", \"type\": \"string\"}]}',
							key_schema => '\"string\"')");

# the ids are the registry's
my $latest = decode_json($registry->http('GET', '/subjects/shop.orders-value/versions/latest')->{content});
my $latest_key = decode_json($registry->http('GET', '/subjects/shop.orders-key/versions/latest')->{content});
is( $node->safe_psql('postgres',
		"SELECT format, value_schema_id, key_schema_id FROM outbox_topic('shop.orders')"),
	"avro|$latest->{id}|$latest_key->{id}",
	'set_topic: the schemas registered under <topic>-value and <topic>-key, their ids kept');
my @events = (
	{
		key => '{"id": 1}',
		payload => {
			id => 1, qty => 2, paid => JSON::PP::true, weight => 1.5, ratio => 0.25,
			name => "caf\x{e9}", note => undef, ref => undef, status => 'NEW',
			tags => [ 'a', 'b' ], counts => { x => 1, y => -2 },
			address => { city => 'Paris', zip => '75001' },
			lines => [ { sku => 'A-1', price => 12.3 }, { sku => 'B-2', price => '-0.05' } ],
			total => 12.25, at => '2026-11-24T18:30:00.123Z', day => '2026-11-24',
			uid => '6f1c7d2e-8a0b-4c2d-9e3f-0a1b2c3d4e5f', digest => 'AAECAw==',
			blob => '', channel => 'shop'
		}
	},
	{
		key => '{"id": 2}',
		payload => {
			id => 2, qty => -1, paid => JSON::PP::false, weight => 0, ratio => -10000000000,
			name => '', note => 'fragile', ref => 'R-7', status => 'SHIPPED',
			tags => [], counts => {}, address => { city => 'Lyon', zip => undef },
			lines => [], total => '-123456789.125', at => 1764009000000,
			day => 0, uid => '00000000-0000-0000-0000-000000000000', digest => '/////w==',
			blob => 'aGVsbG8='
		}
	},
	{
		key => '{"id": 3}',
		payload => {
			id => 1099511627776, qty => 2147483647, paid => JSON::PP::true, weight => -2.5,
			ratio => 3.5, name => 'x', ref => 42, status => 'PAID', tags => ['z'],
			counts => { big => 1099511627776 }, address => undef,
			lines => [ { sku => 'C', price => 9999999.99 } ], total => 0,
			at => '2026-01-01T01:00:00+01:00', day => 20000,
			uid => 'ABCDEF12-3456-7890-abcd-ef1234567890', digest => 'AQIDBA==', blob => 'AA=='
		}
	});
my $json = JSON::PP->new->canonical->ascii;
my $requests = $registry->requests->{total};
for my $e (@events)
{
	my $payload = $json->encode($e->{payload});
	$node->safe_psql('postgres',
		"SELECT outbox_enqueue('shop.orders', \$p\$$payload\$p\$::jsonb, key => '$e->{key}')");
}
$node->safe_psql('postgres', "
	SELECT outbox_enqueue('shop.notes', '{\"text\": \"hello\"}'::jsonb, key => 'note-1');
	SELECT outbox_enqueue('shop.plain', '{\"text\": \"as given\"}'::jsonb, key => 'p')");

is($registry->requests->{total} - $requests, 0,
	'enqueue asks the registry nothing, in sessions of their own');

# stored as the registry's wire format: magic byte 0, the id, Avro binary
is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT encode(substr(payload, 1, 5), 'hex'), ',') FROM outbox_messages WHERE topic = 'shop.orders'"),
	sprintf('00%08x', $latest->{id}),
	'the payloads are stored in the wire format, with the value schema id');
is($node->safe_psql('postgres', "SELECT key FROM outbox_messages WHERE topic = 'shop.orders' ORDER BY id LIMIT 1"),
	'{"id": 1}', 'the key is stored as given');

# mismatches: refused with their field and type, nothing enqueued
my %good = %{ $events[0]{payload} };
my @mismatches = (
	[ { id => 'one' }, qr/^Field "id" should be long, not the string "one"\.$/, 'a string for a long' ],
	[ { qty => 2147483648 }, qr/^Field "qty" should be int, not 2147483648 \(not a 32-bit integer\)\.$/, 'an int out of range' ],
	[ { id => 1.5 }, qr/^Field "id" should be long, not 1\.5/, 'a fraction for a long' ],
	[ { name => undef }, qr/^Field "name" should be string, not null\.$/, 'null for a string' ],
	[ { status => 'LOST' }, qr/^Field "status" should be enum shop\.Status \(NEW, PAID, SHIPPED\)|^Field "status" should be enum Status \(NEW, PAID, SHIPPED\)/, 'an enum symbol' ],
	[ { tags => [ 'a', 3 ] }, qr/^Field "tags\[1\]" should be string, not 3\.$/, 'an array item, by index' ],
	[ { counts => { x => 'y' } }, qr/^Field "counts\.x" should be long, not the string "y"\.$/, 'a map value, by key' ],
	[ { address => { city => 5 } }, qr/^Field "address\.city" should be string, not 5\.$/, 'a field of a nullable record' ],
	[ { lines => [ { sku => 'A', price => 1.234 } ] }, qr/^Field "lines\[0\]\.price" should be decimal\(9,2\), not 1\.234 \(more than 2 decimals\)\.$/, 'a decimal with too many decimals' ],
	[ { lines => [ { sku => 'A', price => 12345678.9 } ] }, qr/^Field "lines\[0\]\.price" should be decimal\(9,2\), not 12345678\.9 \(more than 9 digits\)\.$/, 'a decimal with too many digits' ],
	[ { ref => JSON::PP::true }, qr/^Field "ref" should be null, long or string, not true\.$/, 'a union none of whose branches fits' ],
	[ { at => '2026-11-24 18:30' }, qr/^Field "at" should be timestamp-millis, not the string "2026-11-24 18:30" \(not an RFC 3339 timestamp/, 'a timestamp without its offset' ],
	[ { at => '2026-11-24T18:30:00.1234Z' }, qr/^Field "at" should be timestamp-millis, .*to the millisecond\)\.$/, 'a timestamp finer than a millisecond' ],
	[ { day => '2026-02-30' }, qr/^Field "day" should be date, not the string "2026-02-30" \(not a date YYYY-MM-DD\)\.$/, 'a date that does not exist' ],
	[ { uid => 'not-a-uuid' }, qr/^Field "uid" should be uuid, not the string "not-a-uuid" \(not a UUID\)\.$/, 'a uuid' ],
	[ { digest => 'AAEC' }, qr/^Field "digest" should be fixed shop\.Digest \(4 bytes\)|^Field "digest" should be fixed Digest \(4 bytes\), not the string "AAEC" \(3 bytes\)\.$/, 'a fixed of another size' ],
	[ { blob => '!!' }, qr/^Field "blob" should be bytes, not the string "!!" \(not base64\)\.$/, 'bytes not in base64' ],
	[ { colour => 'red' }, qr/^Field "colour" is not in record (shop\.)?Order\.$/, 'a field the schema does not have' ],
	[ { qty => undef, id => undef }, qr/^Field "id" should be long, not null\.$/, 'the first field that does not fit' ]);
my $before = $node->safe_psql('postgres', "SELECT count(*) FROM outbox_messages");
for my $m (@mismatches)
{
	my %payload = (%good, %{ $m->[0] });
	my $text = $json->encode(\%payload);
	my ($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', \$p\$$text\$p\$::jsonb, key => '{\"id\": 1}')");
	is($state, '22023', "mismatch refused: $m->[2]");
	like($detail, $m->[1], "mismatch: $m->[2], its field and type");
}
my %missing = %good;
delete $missing{qty};
my ($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', \$p\$" . $json->encode(\%missing) . "\$p\$::jsonb)");
is("$state $detail", '22023 Field "qty" should be int, not missing.', 'a field missing without a default');
($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', '[]'::jsonb)");
like("$state $detail", qr/^22023 The value should be record (shop\.)?Order, not an array\.$/, 'the value itself');
($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', \$p\$" . $json->encode(\%good) . "\$p\$::jsonb, key => '{\"id\": \"1\"}')");
is("$state $detail", '22023 Field "id" should be long, not the string "1".', 'a key that does not fit its schema');
($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', \$p\$" . $json->encode(\%good) . "\$p\$::jsonb, key => '1,2')");
is("$state $detail", '22023 The value is not JSON, and its schema is not a string.', 'a key that is not JSON');
($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', 'text'::text)");
is($state, '22023', 'a text payload on an avro topic is refused');
($state, $detail) = try_sql("SELECT outbox_enqueue('shop.orders', '\\x00'::bytea)");
is($state, '22023', 'a bytea payload on an avro topic is refused');

# a trigger's JSON on an Avro topic, which outbox_enqueue would have
# encoded, is refused rather than published unencoded
$node->safe_psql('postgres', "
	CREATE TABLE captured (id int PRIMARY KEY);
	SELECT outbox_attach('captured', 'shop.orders')");
($state, $detail) = try_sql("INSERT INTO captured VALUES (1)");
is("$state $detail",
	'22023 Its events are checked against its Avro schema and encoded by outbox_enqueue() with a jsonb payload.',
	'a captured change, JSON, on an Avro topic is refused');
$node->safe_psql('postgres', "SELECT outbox_detach('captured')");
is($node->safe_psql('postgres', "SELECT count(*) FROM outbox_messages"), $before, 'nothing refused was enqueued');

# a fixed is of exactly its size, none when that is 0 (its bytes would
# run into the next field's), a decimal too
$node->safe_psql('postgres', q{
	SELECT outbox_set_topic('shop.fixed0', format => 'avro', value_schema => '{"type": "record", "name": "Fixed0", "fields": [
		{"name": "empty", "type": ["null", {"type": "fixed", "name": "Empty", "size": 0}]},
		{"name": "small", "type": ["null", {"type": "fixed", "name": "Small", "size": 0, "logicalType": "decimal", "precision": 1, "scale": 0}]}]}')});
($state, $detail) = try_sql(q{SELECT outbox_enqueue('shop.fixed0', '{"empty": "QUJD"}'::jsonb)});
is("$state $detail", '22023 Field "empty" should be fixed Empty (0 bytes), not the string "QUJD" (3 bytes).',
	'a fixed of size 0 takes no bytes');
($state, $detail) = try_sql(q{SELECT outbox_enqueue('shop.fixed0', '{"small": 0}'::jsonb)});
is("$state $detail", '22023 Field "small" should be decimal(1,0), not 0 (more than 0 bytes).',
	'a decimal in a fixed of size 0 holds no number');

# a missing field's default of bytes or fixed is its code points 0 to
# 255, as Avro writes defaults in JSON, not base64
$node->safe_psql('postgres', q{
	SELECT outbox_set_topic('shop.defaults', format => 'avro', value_schema => '{"type": "record", "name": "Defaults", "fields": [
		{"name": "blob", "type": "bytes", "default": "AB\u00ff"},
		{"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 2}, "default": "\u0001\u0002"}]}')});
try_sql(q{SELECT outbox_enqueue('shop.defaults', '{}'::jsonb)});
try_sql(q{SELECT outbox_enqueue('shop.defaults', '{"blob": "AAAA", "tag": "AAE="}'::jsonb)});
is( $node->safe_psql('postgres',
		"SELECT string_agg(encode(substr(payload, 6), 'hex'), ',' ORDER BY id) FROM outbox_messages WHERE topic = 'shop.defaults'"),
	'064142ff0102,060000000001',
	'defaults of bytes and fixed are their code points; values given are base64');

# two records of the same fields, each a branch of the other's field: a
# value that fits neither, 40 levels deep, is refused at once, where each
# level tried both branches of the one below it (2^40 tries: days of CPU,
# for an enqueue, or for the worker encoding a key at publish)
$node->safe_psql('postgres', q{
	SELECT outbox_set_topic('shop.twins', format => 'avro', value_schema => '{"type": "record", "name": "Twin1", "fields": [
		{"name": "c", "type": ["null", "int", "Twin1", {"type": "record", "name": "Twin2", "fields": [
			{"name": "c", "type": ["null", "int", "Twin1", "Twin2"]}]}]}]}')});
($state, $detail) = try_sql(q{
	SET statement_timeout = '10s';
	SELECT outbox_enqueue('shop.twins', (repeat('{"c": ', 40) || '"x"' || repeat('}', 40))::jsonb)});
is("$state $detail", '22023 Field "c" should be null, int, record Twin1 or record Twin2, not an object.',
	'a union of records of the same fields tries each part of a value once per type');

# a rolled back enqueue publishes nothing
$node->safe_psql('postgres', "
	BEGIN;
	SELECT outbox_enqueue('shop.notes', '{\"text\": \"rolled back\"}'::jsonb, key => 'note-2');
	ROLLBACK;
	SELECT outbox_enqueue('shop.notes', '{\"text\": \"after\"}'::jsonb, key => 'note-3')");

# a compatibility refusal: the registry's message, the row as it was
($state, $detail) = try_sql("
	SELECT outbox_set_topic('shop.notes', format => 'avro',
		value_schema => '{\"type\": \"record\", \"name\": \"Note\", \"fields\": [{\"name\": \"text\", \"type\": \"long\"}]}')");
is($state, '22023', 'an incompatible schema is refused');
like($detail, qr/incompatible/, "the refusal carries the registry's message");
is( $node->safe_psql('postgres', "SELECT key_schema_id IS NOT NULL FROM outbox_topic('shop.notes')"),
	't', 'the refused setting left the row as it was');

# a session that read the settings sees a change once it commits
my $session = $node->background_psql('postgres');
$session->query_safe("SELECT outbox_enqueue('shop.later', '{\"n\": 1}'::jsonb)");
$node->safe_psql('postgres', "
	SELECT outbox_set_topic('shop.later', format => 'avro',
		value_schema => '{\"type\": \"record\", \"name\": \"Later\", \"fields\": [{\"name\": \"n\", \"type\": \"int\"}]}')");
$session->query_safe("SELECT outbox_enqueue('shop.later', '{\"n\": 2}'::jsonb)");
$node->safe_psql('postgres', "SELECT outbox_reset_topic('shop.later')");
$session->query_safe("SELECT outbox_enqueue('shop.later', '{\"n\": 3}'::jsonb)");
$session->quit;
is( $node->safe_psql('postgres',
		"SELECT string_agg(get_byte(payload, 0)::text, ',' ORDER BY id) FROM outbox_messages WHERE topic = 'shop.later'"),
	'123,0,123', "a session's enqueues follow set_topic and reset_topic once they commit");

my $orders = wait_for_records($broker, 'shop.orders', 3);
is(scalar @$orders, 3, 'the avro events are published');
my $notes = wait_for_records($broker, 'shop.notes', 2);
is(scalar @$notes, 2, 'a rolled back enqueue publishes nothing');
is(wait_for_records($broker, 'shop.plain', 1)->[0]{payload}, '{"text": "as given"}',
	'a topic without settings is published as given');

# the registry down: events encoded before go on being published, enqueue
# goes on, a new schema waits for it
$broker->command('down -1');
$node->safe_psql('postgres', "SELECT outbox_enqueue('shop.notes', '{\"text\": \"encoded before\"}'::jsonb, key => 'n4')");
$registry->down;
$broker->command('up -1');
$node->safe_psql('postgres', "SELECT outbox_enqueue('shop.notes', '{\"text\": \"registry down\"}'::jsonb, key => 'n5')");
($state, $detail) = try_sql("
	SELECT outbox_set_topic('shop.new', format => 'avro', value_schema => '\"string\"')");
is($state, '08006', 'the registry down: a new schema cannot be set');
$notes = wait_for_records($broker, 'shop.notes', 4);
is(scalar @$notes, 4, 'the registry down: encoded events are published, enqueue goes on');
$registry->up;

# a NULL key on a topic with a key schema is published keyless, as
# docs/avro.md says: no key at all, not an Avro null
$node->safe_psql('postgres', q{
	SELECT outbox_set_topic('shop.keyless', format => 'avro', value_schema => '"string"',
							key_schema => '"string"');
	SELECT outbox_enqueue('shop.keyless', '"no key"'::jsonb)});
my $keyless = wait_for_records($broker, 'shop.keyless', 1)->[0];
is(join('|', $keyless->{key} // 'no key', unpack('H2', $keyless->{payload})),
	'no key|00', 'a NULL key with a key schema: published without a key, the value in Avro');

# a consumer with Confluent's deserializer reads every type back
SKIP:
{
	my $why = node_module_unavailable('kafkajs@2', '@kafkajs/confluent-schema-registry@3', 'avsc@5');
	skip "the Avro consumer: $why", 5 if $why;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'node', "$drivers/avro_consume.js", $broker->{bootstrap}, $registry->{url}, 7,
			'shop.orders', 'shop.notes'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	my @consumed = map { decode_json($_) } grep { /\S/ } split /\n/, $out;
	is(scalar(grep { !exists $_->{error} } @consumed), 7, 'the consumer decodes every record')
	  or diag($err, map { "$_->{topic}: $_->{error}\n" } grep { exists $_->{error} } @consumed);
	# by key: the partitions of a topic are read in no order
	my @orders = sort { $a->{key}{id} <=> $b->{key}{id} } grep { $_->{topic} eq 'shop.orders' } @consumed;
	my @notes = sort { $a->{key} cmp $b->{key} } grep { $_->{topic} eq 'shop.notes' } @consumed;
	my @values = map { $_->{value} } @orders;
	is_deeply(
		\@values,
		[
			{
				id => 1, qty => 2, paid => JSON::PP::true, weight => 1.5, ratio => 0.25,
				name => "caf\x{e9}", note => undef, ref => undef, status => 'NEW',
				tags => [ 'a', 'b' ], counts => { x => 1, y => -2 },
				address => { city => 'Paris', zip => '75001' },
				lines => [ { sku => 'A-1', price => '12.30' }, { sku => 'B-2', price => '-0.05' } ],
				total => '12.250', at => '2026-11-24T18:30:00.123Z', day => '2026-11-24',
				uid => '6f1c7d2e-8a0b-4c2d-9e3f-0a1b2c3d4e5f', digest => 'AAECAw==',
				blob => '', channel => 'shop'
			},
			{
				id => 2, qty => -1, paid => JSON::PP::false, weight => 0, ratio => -10000000000,
				name => '', note => 'fragile', ref => 'R-7', status => 'SHIPPED',
				tags => [], counts => {}, address => { city => 'Lyon', zip => undef },
				lines => [], total => '-123456789.125', at => '2025-11-24T18:30:00.000Z',
				day => '1970-01-01', uid => '00000000-0000-0000-0000-000000000000',
				digest => '/////w==', blob => 'aGVsbG8=', channel => 'web'
			},
			{
				id => 1099511627776, qty => 2147483647, paid => JSON::PP::true, weight => -2.5,
				ratio => 3.5, name => 'x', note => undef, ref => 42, status => 'PAID', tags => ['z'],
				counts => { big => 1099511627776 }, address => undef,
				lines => [ { sku => 'C', price => '9999999.99' } ], total => '0.000',
				at => '2026-01-01T00:00:00.000Z', day => '2024-10-04',
				uid => 'ABCDEF12-3456-7890-abcd-ef1234567890', digest => 'AQIDBA==', blob => 'AA==',
				channel => 'web'
			}
		],
		'every Avro type of the record decodes to the value given');
	is_deeply([ map { $_->{key} } @orders ],
		[ { id => 1 }, { id => 2 }, { id => 3 } ], 'the keys decode by the key schema');
	is_deeply([ map { [ $_->{key}, $_->{value}{text} ] } @notes ],
		[ [ 'n4', 'encoded before' ], [ 'n5', 'registry down' ], [ 'note-1', 'hello' ], [ 'note-3', 'after' ] ],
		'a string key schema takes the key as the string');
	is_deeply([ map { $_->{schema_id} } @orders ],
		[ ($latest->{id}) x 3 ], 'each record names the value schema id');
}

# a trigger's JSON on an Avro topic is refused, not stored unencoded
$node->safe_psql('postgres', "
	CREATE TABLE avro_captured (id int PRIMARY KEY, text text);
	SELECT outbox_attach('avro_captured', 'shop.notes')");
($state, $detail) = try_sql("INSERT INTO avro_captured VALUES (1, 'x')");
is($state, '22023', "a capture trigger's JSON on an Avro topic is refused");
$node->safe_psql('postgres', "SELECT outbox_detach('avro_captured')");

# a stored key that the worker cannot encode (its topic's key schema
# changed under it; here a number a double cannot hold) is refused for
# good, and the worker goes on with the other events
my $note_schema = '{"type": "record", "name": "Note", "fields": [{"name": "text", "type": "string"}]}';
$registry->http('PUT', '/config/shop.k-key', '{"compatibility": "NONE"}');
$node->safe_psql('postgres', "
	SELECT outbox_set_topic('shop.k', brokers => '127.0.0.1:1', format => 'avro',
							value_schema => '$note_schema', key_schema => '\"string\"');
	SELECT outbox_enqueue('shop.k', '{\"text\": \"bad key\"}'::jsonb, key => '{\"id\": 1e1000000}');
	SELECT outbox_enqueue('shop.k', '{\"text\": \"good key\"}'::jsonb, key => '{\"id\": 2}');
	SELECT outbox_set_topic('shop.k', format => 'avro', value_schema => '$note_schema',
		key_schema => '{\"type\": \"record\", \"name\": \"K\", \"fields\": [{\"name\": \"id\", \"type\": \"double\"}]}')");
ok( wait_for_sql($node,
		"SELECT count(*) FILTER (WHERE status = 'published') = 1 AND count(*) FILTER (WHERE status = 'abandoned') = 1
		   FROM outbox_messages WHERE topic = 'shop.k'"),
	'a key the worker cannot encode is abandoned, the next event published');
like( $node->safe_psql('postgres',
		"SELECT last_error FROM outbox_messages WHERE topic = 'shop.k' AND status = 'abandoned'"),
	qr/Avro key schema/, 'the abandoned event says why');

# a decimal's work is bounded: converting its digits to binary is
# quadratic in them (src/format/decimal.c), so a topic takes a precision of
# at most 1000, PostgreSQL's own bound for numeric (22023 past it, asked
# before the registry is); the largest encodes exactly.
my $wide = '{"type": "bytes", "logicalType": "decimal", "precision": 200000, "scale": 100000}';
($state, $detail) = try_sql("SELECT outbox_set_topic('shop.wide', format => 'avro', value_schema => '$wide')");
is_deeply([ $state, $detail ],
	[ '22023', 'A decimal has a precision of at most 1000 here, as PostgreSQL\'s numeric has; this one has 200000.' ],
	'a decimal of precision 200000 is refused when setting a topic');
my $nines = ('9' x 500) . '.' . ('9' x 500);
$node->safe_psql('postgres', qq{
	SELECT outbox_set_topic('shop.max', brokers => '127.0.0.1:1', format => 'avro',
		value_schema => '{"type": "bytes", "logicalType": "decimal", "precision": 1000, "scale": 500}');
	SELECT outbox_enqueue('shop.max', '$nines'::jsonb);
	SELECT outbox_enqueue('shop.max', '-$nines'::jsonb);
});
# Avro bytes: the length (a zig-zag varint), then the two's complement
sub avro_decimal
{
	my ($n) = @_;
	my $negative = $n < 0;
	my $hex = substr(($negative ? -$n - 1 : $n)->as_hex, 2);
	$hex = "0$hex" if length($hex) % 2;
	$hex = "00$hex" if $hex =~ /^[89a-f]/;
	$hex =~ tr/0-9a-f/fedcba9876543210/ if $negative;
	my $zigzag = 2 * (length($hex) / 2);    # twice the bytes
	my $varint = '';
	for (; $zigzag >= 0x80; $zigzag >>= 7)
	{
		$varint .= sprintf('%02x', ($zigzag & 0x7f) | 0x80);
	}
	return $varint . sprintf('%02x', $zigzag) . $hex;
}
my $max = Math::BigInt->new('9' x 1000);
is($node->safe_psql('postgres',
		"SELECT string_agg(encode(substring(payload FROM 6), 'hex'), ',' ORDER BY id) FROM outbox_log WHERE topic = 'shop.max'"),
	avro_decimal($max) . ',' . avro_decimal(-$max),
	'the largest precision encodes a value of 1000 digits exactly, either sign');

# a schema stored with more, set before the bound or restored from a dump
# (the rows are written as they were), is served: 100,001 digits encode in
# well under a second (seconds, before), and a million are cancelled by
# statement_timeout at once, where nothing stopped the conversion
$node->safe_psql('postgres', qq{
	INSERT INTO outbox_topic_settings (pattern, brokers, format, value_schema, value_schema_id)
	VALUES ('shop.kept', '127.0.0.1:1', 'avro', '$wide', 900001),
		   ('shop.huge', '127.0.0.1:1', 'avro',
			'{"type": "bytes", "logicalType": "decimal", "precision": 999999, "scale": 999990}', 900002)});
($state) = try_sql("SET statement_timeout = '1s'; SELECT outbox_enqueue('shop.kept', '1'::jsonb)");
is($state, '', 'a stored decimal of 100,001 digits encodes within a second');
my $started = [Time::HiRes::gettimeofday()];
($state) = try_sql("SET statement_timeout = '200ms'; SELECT outbox_enqueue('shop.huge', '1'::jsonb)");
my $took = Time::HiRes::tv_interval($started);
ok($state eq '57014' && $took < 1,
	"a stored decimal of a million digits is cancelled by statement_timeout ($state after $took s)");

# The bytes of every Avro type, as Apache Avro's C library wrote them (the
# extension wrote them through libavro's values before it had a writer of
# its own): records, a union of every branch, arrays and maps empty or
# not, enums, decimals in bytes and fixed of either sign, floats, defaults,
# a recursive record, logical types; the payload after the wire-format
# prefix.  A key goes through the same writer.
my @corpus = (
	[
		'order',
		q{{"type": "record", "name": "Order", "namespace": "shop", "fields": [ {"name": "id", "type": "long"}, {"name": "qty", "type": "int"}, {"name": "paid", "type": "boolean"}, {"name": "weight", "type": "float"}, {"name": "ratio", "type": "double"}, {"name": "name", "type": "string"}, {"name": "note", "type": ["null", "string"], "default": null}, {"name": "ref", "type": ["null", "long", "string"]}, {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}}, {"name": "tags", "type": {"type": "array", "items": "string"}}, {"name": "counts", "type": {"type": "map", "values": "long"}}, {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"]}]}]}, {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}, {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}}}, {"name": "total", "type": {"type": "fixed", "name": "Total", "size": 8, "logicalType": "decimal", "precision": 12, "scale": 3}}, {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "day", "type": {"type": "int", "logicalType": "date"}}, {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}}, {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}}, {"name": "blob", "type": "bytes"}, {"name": "channel", "type": "string", "default": "web"}]}},
		[
			[ q{{"id": 1, "qty": 2, "paid": true, "weight": 1.5, "ratio": 0.25, "name": "caf\u00e9", "note": null, "ref": null, "status": "NEW", "tags": ["a", "b"], "counts": {"x": 1, "y": -2, "zz": 300, "a": 0}, "address": {"city": "Paris", "zip": "75001"}, "lines": [{"sku": "A-1", "price": 12.3}, {"sku": "B-2", "price": "-0.05"}], "total": 12.25, "at": "2026-11-24T18:30:00.123Z", "day": "2026-11-24", "uid": "6f1c7d2e-8a0b-4c2d-9e3f-0a1b2c3d4e5f", "digest": "AAECAw==", "blob": "", "channel": "shop"}},
			  '0204010000c03f000000000000d03f0a636166c3a900000004026102620008026100027802027903047a7ad80400020a5061726973020a37353030310406412d310404ce06422d3202fb000000000000002fdaf6a293edc168dac4024836663163376432652d386130622d346332642d396533662d30613162326333643465356600010203000873686f70' ],
			[ q{{"id": 2, "qty": -1, "paid": false, "weight": 0, "ratio": -10000000000, "name": "", "note": "fragile", "ref": "R-7", "status": "SHIPPED", "tags": [], "counts": {}, "address": {"city": "Lyon", "zip": null}, "lines": [], "total": "-123456789.125", "at": 1764009000000, "day": 0, "uid": "00000000-0000-0000-0000-000000000000", "digest": "/////w==", "blob": "aGVsbG8="}},
			  '04010000000000000000205fa002c200020e66726167696c650406522d3704000002084c796f6e0000ffffffe34166e57b80f189f2d666004830303030303030302d303030302d303030302d303030302d303030303030303030303030ffffffff0a68656c6c6f06776562' ],
			[ q{{"id": 1099511627776, "qty": 2147483647, "paid": true, "weight": -2.5, "ratio": 3.5, "name": "x", "ref": 42, "status": "PAID", "tags": ["z"], "counts": {"big": 1099511627776}, "address": null, "lines": [{"sku": "C", "price": 9999999.99}], "total": 0, "at": "2026-01-01T01:00:00+01:00", "day": 20000, "uid": "ABCDEF12-3456-7890-abcd-ef1234567890", "digest": "AQIDBA==", "blob": "AA=="}},
			  '808080808040feffffff0f01000020c00000000000000c4002780002540202027a0002066269678080808080400000020243083b9ac9ff00000000000000000080a0d5edee66c0b8024841424344454631322d333435362d373839302d616263642d65663132333435363738393001020304020006776562' ],
			[ q{{"id": -9223372036854775808, "qty": -2147483648, "paid": false, "weight": 3.4028234663852886e38, "ratio": 1e-300, "name": "\u65e5\u672c\u8a9e \ud83d\ude00", "ref": -1, "status": "NEW", "tags": ["", "a\"b", "\\\\"], "counts": {"\u00e9": -9223372036854775807}, "address": {"city": "", "zip": ""}, "lines": [{"sku": "", "price": 0}, {"sku": "n", "price": -9999999.99}], "total": "-999999999.999", "at": -1, "day": -719162, "uid": "ffffffff-ffff-ffff-ffff-ffffffffffff", "digest": "AAAAAA==", "blob": "////", "channel": ""}},
			  'ffffffffffffffffff01ffffffff0f00ffff7f7f59f3f8c21f6ea5011ce697a5e69cace8aa9e20f09f988000020100060006612262025c000204c3a9fdffffffffffffffff01000200020004000200026e08c465360100ffffff172b5af00101f3e4574866666666666666662d666666662d666666662d666666662d6666666666666666666666660000000006ffffff00' ]
		]
	],
	[
		'list',
		q{{"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": null}]}},
		[
			[ q{{"v": 1}},
			  '0200' ],
			[ q{{"v": 1, "next": {"v": 2, "next": {"v": -3, "next": null}}}},
			  '020204020500' ]
		]
	],
	[
		'union',
		q{["null", "boolean", "int", "long", "float", "double", "string", "bytes", {"type": "array", "items": "int"}, {"type": "map", "values": "string"}, {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}, {"type": "enum", "name": "E", "symbols": ["X", "Y"]}]},
		[
			[ q{null},
			  '00' ],
			[ q{true},
			  '0201' ],
			[ q{5},
			  '040a' ],
			[ q{5000000000},
			  '0680c8afa025' ],
			[ q{1.5},
			  '080000c03f' ],
			[ q{"s"},
			  '0c0273' ],
			[ q{[1,2,3]},
			  '100602040600' ],
			[ q{[]},
			  '1000' ],
			[ q{{"k": "v", "kk": "vv"}},
			  '1204026b0276046b6b04767600' ],
			[ q{{}},
			  '1200' ],
			[ q{{"a": 7}},
			  '140e' ],
			[ q{"X"},
			  '0c0258' ]
		]
	],
	[
		'scalars',
		q{{"type": "array", "items": {"type": "map", "values": ["double", "null"]}}},
		[
			[ q{[]},
			  '00' ],
			[ q{[{}]},
			  '020000' ],
			[ q{[{"a": 1.0, "b": null, "c": -0.5}, {"x": 1e308}]},
			  '0406026100000000000000f03f026202026300000000000000e0bf0002027800a0c8eb85f3cce17f0000' ]
		]
	],
	[
		'defaults',
		q{{"type": "record", "name": "D", "fields": [{"name": "a", "type": "int", "default": 7}, {"name": "b", "type": {"type": "array", "items": "string"}, "default": ["x", "y"]}, {"name": "c", "type": ["string", "null"], "default": "dflt"}, {"name": "d", "type": {"type": "map", "values": "int"}, "default": {"q": 1}}, {"name": "e", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 10}, "default": "1.5"}]}},
		[
			[ q{{}},
			  '0e040278027900000864666c7402027102000a037e11d600' ],
			[ q{{"a": -7, "b": [], "c": null, "d": {}, "e": "-12345678901234567890.0123456789"}},
			  '0d0002001afe7116f0093c8c1f11f3fb2aeb' ],
			[ q{{"e": 0.0000000001}},
			  '0e040278027900000864666c7402027102000201' ]
		]
	],
	[
		'fixeddec',
		q{{"type": "fixed", "name": "F", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0}},
		[
			[ q{0},
			  '00000000000000000000000000000000' ],
			[ q{-1},
			  'ffffffffffffffffffffffffffffffff' ],
			[ q{99999999999999999999999999999999999999},
			  '4b3b4ca85a86c47a098a223fffffffff' ],
			[ q{-99999999999999999999999999999999999999},
			  'b4c4b357a5793b85f675ddc000000001' ],
			[ q{128},
			  '00000000000000000000000000000080' ],
			[ q{-128},
			  'ffffffffffffffffffffffffffffff80' ],
			[ q{255},
			  '000000000000000000000000000000ff' ],
			[ q{-256},
			  'ffffffffffffffffffffffffffffff00' ]
		]
	],
	[
		'floaty',
		q{{"type": "record", "name": "Fl", "fields": [{"name": "f", "type": "float"}, {"name": "d", "type": "double"}]}},
		[
			[ q{{"f": 0.1, "d": 0.1}},
			  'cdcccc3d9a9999999999b93f' ],
			[ q{{"f": -0.0, "d": -0.0}},
			  '000000000000000000000000' ],
			[ q{{"f": 1e-45, "d": 5e-324}},
			  '010000000100000000000000' ],
			[ q{{"f": 16777217, "d": 9007199254740993}},
			  '0000804b0000000000004043' ]
		]
	],
	[
		'string',
		q{"string"},
		[
			[ q{"plain"},
			  '0a706c61696e' ],
			[ q{""},
			  '00' ],
			[ q{"\u0001\u001f"},
			  '04011f' ]
		]
	],
	[
		'timestamp',
		q{{"type": "long", "logicalType": "timestamp-micros"}},
		[
			[ q{"1970-01-01T00:00:00Z"},
			  '00' ],
			[ q{"2026-11-24T18:30:00.123456+05:30"},
			  '80d9e89ba9c1b006' ],
			[ q{"0001-01-01T00:00:00Z"},
			  'ffffddf2dfffdfdc01' ],
			[ q{-62135596800000000},
			  'ffffddf2dfffdfdc01' ]
		]
	]);
my $schema_id = 910000;
for my $c (@corpus)
{
	my ($name, $schema, $values) = @$c;
	$schema_id++;
	$node->safe_psql('postgres', qq{
		INSERT INTO outbox_topic_settings (pattern, brokers, format, value_schema, value_schema_id)
		VALUES ('bytes.$name', '127.0.0.1:1', 'avro', \$s\$$schema\$s\$, $schema_id)});
	for my $i (0 .. $#$values)
	{
		my ($value, $hex) = @{ $values->[$i] };
		my $id = $node->safe_psql('postgres',
			"SELECT outbox_enqueue('bytes.$name', \$v\$$value\$v\$::jsonb)");
		is( $node->safe_psql('postgres',
				"SELECT encode(substring(payload FROM 6), 'hex') FROM outbox_log WHERE id = $id"),
			$hex, "the Avro bytes of a $name, value $i");
	}
}

$node->stop;
$broker->stop;
$registry->stop;
done_testing();
