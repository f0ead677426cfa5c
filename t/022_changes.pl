
# Change events in Debezium's shape (outbox_attach(..., format =>
# 'debezium')): inserts, updates, deletes, an update of the key and a
# truncate of a table with a composite primary key and columns of the
# common types arrive in Kafka as the PostgreSQL connector writes them
# with the JSON converter and schemas.enable=false.  Every record is
# checked field by field: the topic, the key, the headers, each value as
# docs/debezium.md encodes its type, byte for byte, the source block
# (transaction id, start time, WAL position), the op, the times, and the
# record's timestamp; with the connector's defaults: before as REPLICA
# IDENTITY DEFAULT gives it, each delete followed by a tombstone, truncates
# published only when asked.

use strict;
use warnings;

use JSON::PP;
use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $TOPIC = 'dbserver1.shop.items';

my ($node, $broker) =
  outbox_node_with_broker('changes', 'outbox.poll_interval' => '100ms');
$node->safe_psql(
	'postgres', q{
	CREATE SCHEMA shop;
	CREATE TABLE shop.items (
		shop	text,
		id		int,
		qty		smallint,
		price	numeric(10,2),
		ratio	double precision,
		ok		boolean,
		label	varchar(20),
		born	date,
		at		timestamp,
		at_tz	timestamptz,
		t		time,
		span	interval,
		doc		jsonb,
		bytes	bytea,
		uid		uuid,
		tags	text[],
		PRIMARY KEY (shop, id)
	);
	SELECT outbox_attach('shop.items', 'dbserver1', format => 'debezium');
});

# the columns of a row as the connector writes them, in column order
my @COLUMNS = qw(shop id qty price ratio ok label born at at_tz t span doc bytes uid tags);
my %ROW1 = (
	shop => '"north"',
	id => '1',
	qty => '3',
	price => '"B8Y="',
	ratio => '0.25',
	ok => 'true',
	label => '"a \"b\""',
	born => '19782',
	at => '1709212455123456',
	at_tz => '"2024-02-29T07:44:15.500000Z"',
	t => '47655123456',
	span => '37091106780000',
	doc => '"{\"a\": [1, null]}"',
	bytes => '"AP8="',
	uid => '"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"',
	tags => '["x",null]');
my $ROW1_SQL = q{('north', 1, 3, 19.9, 0.25, true, 'a "b"', '2024-02-29',
	'2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5+05:30', '13:14:15.123456',
	'1 year 2 mons 3 days 04:05:06.78', '{"a": [1, null]}', '\x00ff',
	'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{x,NULL}')};

sub row_json
{
	my (%row) = @_;
	return '{' . join(',', map { "\"$_\":" . ($row{$_} // 'null') } @COLUMNS) . '}';
}

sub key_json
{
	my ($shop, $id) = @_;
	return "{\"shop\":\"$shop\",\"id\":$id}";
}

# the events expected, in order
my @expected;

# Run a transaction; each of @events (op, key, before, after, headers,
# tombstone) gets its id and start time.
sub transaction
{
	my ($sql, @events) = @_;
	my ($xid, $started) = split /\|/,
	  $node->safe_psql('postgres',
		"BEGIN; $sql; SELECT txid_current() % 4294967296, floor(extract(epoch FROM now()) * 1000)::bigint; COMMIT;"
	  );
	push @expected, map { { %$_, xid => $xid, started => $started } } @events;
	return;
}

my %row2 = (%ROW1, id => '2', qty => '5', tags => '[]');
my %row1b = (%ROW1, qty => '4', label => '"changed"');
my %row1c = (%row1b, shop => '"south"');
my %east = map { $_ => undef } @COLUMNS;
@east{qw(shop id)} = ('"east"', '1');

# what logical decoding gives the connector of a deleted row under REPLICA
# IDENTITY DEFAULT: the key columns
sub key_only
{
	my ($shop, $id) = @_;
	my %row = map { $_ => undef } @COLUMNS;
	@row{qw(shop id)} = ("\"$shop\"", $id);
	return row_json(%row);
}

transaction(
	"INSERT INTO shop.items VALUES $ROW1_SQL; INSERT INTO shop.items SELECT shop, 2, 5, price, ratio, ok, label, born, at, at_tz, t, span, doc, bytes, uid, '{}' FROM shop.items",
	{ op => 'c', key => key_json('north', 1), before => undef, after => row_json(%ROW1) },
	{ op => 'c', key => key_json('north', 2), before => undef, after => row_json(%row2) });
transaction(
	"UPDATE shop.items SET qty = 4, label = 'changed' WHERE id = 1",
	{ op => 'u', key => key_json('north', 1), before => undef, after => row_json(%row1b) });
transaction(
	"DELETE FROM shop.items WHERE id = 2",
	{ op => 'd', key => key_json('north', 2), before => key_only('north', 2), after => undef },
	{ tombstone => 1, key => key_json('north', 2) });
transaction(
	"UPDATE shop.items SET shop = 'south' WHERE id = 1",
	{
		op => 'd',
		key => key_json('north', 1),
		before => key_only('north', 1),
		after => undef,
		headers => { '__debezium.newkey' => key_json('south', 1) }
	},
	{ tombstone => 1, key => key_json('north', 1) },
	{
		op => 'c',
		key => key_json('south', 1),
		before => undef,
		after => row_json(%row1c),
		headers => { '__debezium.oldkey' => key_json('north', 1) }
	});
# truncates are skipped by default (skipped.operations=t); published with
# skipped_operations => 'none'
$node->safe_psql('postgres',
	"SELECT outbox_attach('shop.items', 'dbserver1', format => 'debezium', skipped_operations => 'none')");
transaction("TRUNCATE shop.items", { op => 't', key => undef, before => undef, after => undef });
$node->safe_psql('postgres',
	"SELECT outbox_attach('shop.items', 'dbserver1', format => 'debezium', tombstones => true)");
transaction("INSERT INTO shop.items (shop, id) VALUES ('east', 1)",
	{ op => 'c', key => key_json('east', 1), before => undef, after => row_json(%east) });
transaction(
	"DELETE FROM shop.items",
	{ op => 'd', key => key_json('east', 1), before => row_json(%east), after => undef },
	{ tombstone => 1, key => key_json('east', 1) });

wait_for_records($broker, $TOPIC, scalar @expected);
my $records = kafka_read_json($broker, $TOPIC);
is(scalar @$records, scalar @expected, 'one record per event, ' . scalar @expected);

my %taken;
my %last_lsn;
my $now_ms = $node->safe_psql('postgres', 'SELECT floor(extract(epoch FROM now()) * 1000)::bigint');
for my $e (@expected)
{
	my $key = $e->{key};
	my ($r) =
	  grep { (($_->{key} // '') eq ($key // '')) && !$taken{"$_->{partition}/$_->{offset}"} }
	  @$records;
	my $what = ($e->{tombstone} ? 'tombstone' : $e->{op}) . ' ' . ($key // 'without key');
	ok($r, "$what: arrived, on $TOPIC, with its key") or next;
	$taken{"$r->{partition}/$r->{offset}"} = 1;
	is($r->{topic}, $TOPIC, "$what: topic");
	my %headers = @{ $r->{headers} };
	ok($headers{event_id}, "$what: an event_id header");
	delete $headers{event_id};
	is_deeply(\%headers, $e->{headers} // {}, "$what: headers");
	is($r->{ts}, $e->{started}, "$what: the record's timestamp is the transaction's start");
	if ($e->{tombstone})
	{
		is($r->{payload}, undef, "$what: a null value after the delete");
		next;
	}

	my $raw = $r->{payload};
	like(
		$raw,
		qr/^\{"before":.*,"after":.*,"source":\{"version":"outbox-1\.4","connector":"postgresql","name":"dbserver1","ts_ms":\d+,"snapshot":"false","db":"postgres","sequence":null,"ts_us":\d+,"ts_ns":\d+,"schema":"shop","table":"items","txId":\d+,"lsn":\d+,"xmin":null,"origin":null,"origin_lsn":null\},"transaction":null,"op":"$e->{op}","ts_ms":\d+,"ts_us":\d+,"ts_ns":\d+\}$/,
		"$what: the connector's fields, in its order");
	my ($before, $after) = $raw =~ /^\{"before":(null|\{.*\}),"after":(null|\{.*\}),"source"/;
	is($before, $e->{before} // 'null', "$what: before, value by value");
	is($after, $e->{after} // 'null', "$what: after, value by value");

	my $v = JSON::PP->new->allow_bignum->decode($raw);
	my $s = $v->{source};
	is($s->{txId}, $e->{xid}, "$what: source.txId is the transaction's id");
	is($s->{ts_ms}, $e->{started}, "$what: source.ts_ms is its start");
	is(int($s->{ts_us} / 1000), $s->{ts_ms}, "$what: source.ts_us agrees");
	is("$s->{ts_ns}", $s->{ts_us} * 1000, "$what: source.ts_ns agrees");
	ok($v->{ts_ms} >= $s->{ts_ms} && $v->{ts_ms} <= $now_ms + 1000,
		"$what: ts_ms, when the event was made");
	if (defined $key)
	{
		ok(!defined $last_lsn{$key} || $s->{lsn} > $last_lsn{$key},
			"$what: source.lsn grows, key by key");
		$last_lsn{$key} = $s->{lsn};
	}
}

$node->stop;
$broker->stop;
done_testing();
