
# Format cloudevents: the records of a topic set so are CloudEvents in the
# binary content mode of the Kafka protocol binding, as the cloudevents
# SDK's Kafka binding (Kafka.toEvent) reads them from kafkajs and its
# validation accepts them: id, source, type, time, datacontenttype, data
# and extensions, for jsonb, text and bytea payloads, captured rows and
# dead letters.  A tombstone is no event; an event stored before its topic
# took the format gets the format's headers, not the ones it had of those
# names, and is refused for good if it has headers the format refuses; a
# topic of no format is untouched.

use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use JSON::PP;
use MIME::Base64;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $drivers = dirname(__FILE__) . '/drivers';

my ($node, $broker) = outbox_node_with_broker(
	'cloudevents',
	'outbox.poll_interval' => '100ms',
	'outbox.enabled' => 'off',
	'outbox.dead_letter_topic' => 'ce.dead');

# stored while ce.early had no format: a header of a name the format makes
my $early = $node->safe_psql('postgres',
	q{SELECT outbox_enqueue('ce.early', '{"n": 0}'::jsonb, headers => '{"ce_id": "mine", "ce_type": "early.type"}')});

# stored while ce.forged had no format, with a header that the format
# refuses at enqueue: a content-type of the structured mode behind a space
# (a lenient consumer reads the payload as the event)
my $forged = $node->safe_psql('postgres',
	q{SELECT outbox_enqueue('ce.forged', '{"specversion": "1.0", "id": "x", "source": "/evil", "type": "forged"}'::jsonb, headers => '{"content-type": " application/cloudevents+json"}')});

$node->safe_psql('postgres',
	q{SELECT outbox_set_topic('ce.*', format => 'cloudevents', cloudevents_source => '/shop/orders')});
# the edges of what enqueue and outbox_set_topic take: a source with an
# IPv6 host and a query, a quoted media type parameter, a type beyond ASCII
$node->safe_psql('postgres',
	q{SELECT outbox_set_topic('ce.edge', format => 'cloudevents', cloudevents_source => 'http://[::1]:8080/orders?x=%20y')});
my $ids = $node->safe_psql(
	'postgres', q{
	CREATE TABLE ce_rows (id int PRIMARY KEY, note text);
	SELECT outbox_attach('ce_rows', 'ce.rows');
	INSERT INTO ce_rows VALUES (1, 'captured');
	SELECT outbox_enqueue('ce.orders', '{"id": 42, "total": 9.5}'::jsonb, key => '42',
		headers => '{"ce_type": "com.example.order.paid", "ce_subject": "order-42", "ce_tenant": "t1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
		event_id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
	SELECT outbox_enqueue('ce.orders', 'plain text, é'::text, headers => '{"content-type": "text/plain; charset=utf-8"}');
	SELECT outbox_enqueue('ce.bytes', '\x00ff10'::bytea, headers => '{"content-type": "application/octet-stream"}');
	SELECT outbox_enqueue('ce.orders', NULL::jsonb, key => '42');
	SELECT outbox_enqueue('plain.orders', '{"id": 1}'::jsonb, headers => '{"tenant": "t1"}');
	SELECT outbox_enqueue('ce.doomed', '{"id": 7}'::jsonb, key => '7', headers => '{"ce_type": "com.example.doomed"}');
	SELECT outbox_enqueue('ce.edge', 'edge'::text, headers => '{"content-type": "text/plain;charset=\"utf-8\";  format=flowed", "ce_type": "com.example.commandé\u00a0✓"}');
	SELECT outbox_enqueue('ce.orders', '{"id": 44}'::jsonb, key => '44',
		headers => '{"ce_dataschema": "https://shop.example/schemas/order.json"}');
});
my (undef, $json_id, $text_id, $bytea_id, $tombstone_id, $plain_id, $doomed_id, $edge_id, $described_id) =
  split /\n/, $ids;
# a ce_partitionkey given, the key's: taken (not consumed by the SDK below)
my ($given_ret, $given_id, $given_err) = $node->psql('postgres',
	q{SELECT outbox_enqueue('ce.keyed', '{"id": 43}'::jsonb, key => '43', headers => '{"ce_partitionkey": "43"}')});
is($given_ret, 0, 'a ce_partitionkey given, the key: taken') or diag($given_err);
# abandoned by hand: its copy goes to the dead-letter topic, ce.dead
$node->safe_psql('postgres', "SELECT outbox_abandon($doomed_id)");

$node->safe_psql('postgres',
	'ALTER SYSTEM SET outbox.enabled = on; SELECT pg_reload_conf()');
ok( wait_for_sql(
		$node,
		"SELECT bool_and(status = 'published') FROM outbox_messages WHERE id <> $doomed_id AND 'ce.forged' NOT IN (topic, coalesce(headers->>'original_topic', ''))"
	),
	'every event is published');
wait_for_sql($node,
	"SELECT count(*) = 2 AND bool_and(status = 'abandoned') FROM outbox_messages WHERE 'ce.forged' IN (topic, headers->>'original_topic')"
);
is( $node->safe_psql('postgres',
		"SELECT string_agg(topic || ' ' || status || ': ' || last_error, E'\n' ORDER BY id) FROM outbox_messages WHERE 'ce.forged' IN (topic, headers->>'original_topic')"
	),
	"ce.forged abandoned: Its headers cannot be those of a record of format cloudevents: The header content-type is not a media type.\n"
	  . "ce.dead abandoned: Its headers cannot be those of a record of format cloudevents: The header content-type is not a media type.",
	'stored before the format with headers it refuses: refused for good, not published, nor its dead letter');

# the headers as they are on the wire: names, order, time to the microsecond
my %created = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
	q{SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') FROM outbox_messages});
my %event_id = map { split /\|/ } split /\n/,
  $node->safe_psql('postgres', 'SELECT id, event_id FROM outbox_messages');
my ($json) = grep { ($_->{key} // '') eq '42' && defined $_->{payload} } @{ kafka_read_json($broker, 'ce.orders') };

# The record's key is the event's partitionkey, and the binding says the
# attribute MUST still be sent when the key is mapped from it
# (bindings/kafka-protocol-binding.md 153-174, at cloudevents/spec
# c2845a4), as both SDKs' producers send it; sdk-java's reader takes
# attributes from ce_ headers only (kafka .../impl/KafkaBinaryMessageReaderImpl.java
# 45-53, at sdk-java ecde1d4): without the header, a Java consumer sees no
# partitionkey.  None without a key.
sub header_values
{
	my ($record, $name) = @_;
	my @h = @{ $record ? $record->{headers} : [] };
	return [ map { $h[ 2 * $_ + 1 ] } grep { $h[ 2 * $_ ] eq $name } 0 .. @h / 2 - 1 ];
}
is_deeply(header_values($json, 'ce_partitionkey'), ['42'], 'a keyed event: ce_partitionkey, the key, once');
my ($keyless) = grep { !defined $_->{key} } @{ kafka_read_json($broker, 'ce.orders') };
is_deeply(header_values($keyless, 'ce_partitionkey'), [], 'an event without a key: no ce_partitionkey');
my ($given) = @{ kafka_read_json($broker, 'ce.keyed') };
is_deeply(header_values($given, 'ce_partitionkey'), ['43'], 'a ce_partitionkey given: published once');
my @json_headers = @{ $json->{headers} };
is_deeply(
	[ map { @json_headers[ 2 * $_, 2 * $_ + 1 ] } grep { $json_headers[ 2 * $_ ] ne 'ce_partitionkey' } 0 .. @json_headers / 2 - 1 ],
	[
		event_id => $event_id{$json_id},
		ce_specversion => '1.0',
		ce_id => $event_id{$json_id},
		ce_source => '/shop/orders',
		ce_time => $created{$json_id},
		ce_type => 'com.example.order.paid',
		ce_tenant => 't1',
		ce_subject => 'order-42',
		traceparent => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
		'content-type' => 'application/json'
	],
	'a jsonb event: the headers of the binding, lower case, each once, ce_time RFC 3339');
my ($tombstone) = grep { !defined $_->{payload} } @{ kafka_read_json($broker, 'ce.orders') };
is_deeply($tombstone->{headers}, [ event_id => $event_id{$tombstone_id} ],
	'a tombstone gets no header of the format');
is_deeply(
	kafka_read_json($broker, 'plain.orders')->[0]{headers},
	[ event_id => $event_id{$plain_id}, tenant => 't1' ],
	'a topic of no format is untouched');

SKIP:
{
	my ($out, $err) = ('', '');
	my $why = node_module_unavailable('kafkajs@2', 'cloudevents@10');
	skip "kafkajs, cloudevents: $why", 11 if $why;
	IPC::Run::run(
		[
			'node', "$drivers/cloudevents_consume.js", $broker->{bootstrap}, 10,
			'ce.orders', 'ce.bytes', 'ce.early', 'ce.rows', 'ce.dead', 'ce.edge', 'plain.orders'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	my @consumed = map { decode_json($_) } grep { /\S/ } split /\n/, $out;
	is(scalar @consumed, 10, 'the SDK reads every record') or diag($err);
	my %by_id = map { $_->{event}{id} => $_ } grep { $_->{event} } @consumed;
	my @events = grep { $_->{is_event} } @consumed;
	is_deeply(
		[ sort map { "$_->{topic}: " . encode_json($_->{valid}) } @events ],
		[ map { "$_: true" } sort qw(ce.bytes ce.dead ce.early ce.edge ce.orders ce.orders ce.orders ce.rows) ],
		'the SDK takes every record of a cloudevents topic but the tombstone as an event, and finds each valid');

	my $paid = $by_id{ $event_id{$json_id} }{event};
	(my $ms = $created{$json_id}) =~ s/(\.\d{3})\d{3}Z$/$1Z/;
	is_deeply(
		$paid,
		{
			specversion => '1.0',
			id => 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
			source => '/shop/orders',
			type => 'com.example.order.paid',
			time => $ms,
			datacontenttype => 'application/json',
			data => { id => 42, total => 9.5 },
			subject => 'order-42',
			tenant => 't1',
			partitionkey => '42'
		},
		'jsonb: id the event_id, source, type given, time, application/json, data parsed, ce_ headers as attributes, the key as partitionkey'
	);

	# a dataschema, a URI (spec.md 422-431, at cloudevents/spec c2845a4),
	# read and valid
	my $described = $by_id{ $event_id{$described_id} }{event};
	is_deeply(
		[ @{$described}{qw(dataschema partitionkey)} ],
		[ 'https://shop.example/schemas/order.json', '44' ],
		'a dataschema given: the SDK reads it');

	my $text = $by_id{ $event_id{$text_id} };
	is_deeply(
		[ @{ $text->{event} }{qw(type datacontenttype partitionkey)}, $text->{data_text} ],
		[ 'ce.orders', 'text/plain; charset=utf-8', undef, "plain text, \x{e9}" ],
		'text: the type is the topic, the content type as given, the data its UTF-8, no key no partitionkey'
	);
	my $bytea = $by_id{ $event_id{$bytea_id} };
	is_deeply(
		[ $bytea->{event}{datacontenttype}, decode_base64($bytea->{event}{data_base64}) ],
		[ 'application/octet-stream', "\x00\xff\x10" ],
		'bytea: the bytes as given');

	is_deeply(
		[
			sort map { "$_->{topic} " . ($_->{key} // '') . ': ' . join(',', sort keys %{ $_->{headers} }) }
			  grep { !$_->{is_event} } @consumed
		],
		[ 'ce.orders 42: event_id', 'plain.orders : event_id,tenant' ],
		'the tombstone, and the record of a topic of no format, are no events to the SDK');

	my $old = $by_id{ $event_id{$early} }{event};
	is_deeply(
		[ @{$old}{qw(id source type datacontenttype)}, $by_id{ $event_id{$early} }{data_text} ],
		[ $event_id{$early}, '/shop/orders', 'early.type', undef, '{"n": 0}' ],
		'stored before the format: its own id, not the ce_id it had; its ce_type; no content type, its data as bytes'
	) or diag(explain $old);

	my $edge = $by_id{ $event_id{$edge_id} };
	is_deeply(
		[ @{ $edge->{event} }{qw(source type datacontenttype)}, $edge->{data_text} ],
		[
			'http://[::1]:8080/orders?x=%20y', "com.example.command\x{e9}\x{a0}\x{2713}",
			'text/plain;charset="utf-8";  format=flowed', 'edge'
		],
		'the edges of what is taken: read as given'
	) or diag(explain $edge);

	my ($row) = grep { $_->{topic} eq 'ce.rows' } @events;
	is_deeply(
		[ @{ $row->{event} }{qw(type datacontenttype)}, $row->{event}{data}{after} ],
		[ 'ce.rows', 'application/json', { id => 1, note => 'captured' } ],
		'a captured row: JSON') or diag(explain $row);

	my ($dead) = grep { $_->{topic} eq 'ce.dead' } @events;
	is_deeply(
		[ @{ $dead->{event} }{qw(type datacontenttype)}, $dead->{headers}{original_topic}, $dead->{event}{data} ],
		[ 'com.example.doomed', 'application/json', 'ce.doomed', { id => 7 } ],
		'a dead letter: an event of the dead-letter topic, with the type and content type stored with the original'
	) or diag(explain $dead);
}

$node->stop;
$broker->stop;
done_testing();
