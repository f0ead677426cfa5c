
# What runs as the extension's owner in an application's session is
# restricted.  The extension's owner (not a superuser) puts a trigger on
# the tables the extension writes as its owner in the application's
# transaction: outbox_attached and outbox_snapshots_state (outbox_attach),
# outbox_schema_ids (a change captured with the Avro converter, which
# keeps the ids the schema registry gave).  A setting the trigger makes
# for the session is gone when the extension's statement ends; a
# temporary table it creates is refused with 42501, which fails the
# application's call with that error; an application that catches the
# error in a subtransaction goes on as itself, unrestricted.

use strict;
use warnings;

use OutboxTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $no_avsc = node_module_unavailable('avsc@5');
my $registry = $no_avsc ? undef : start_schema_registry();
my ($node, $broker) = outbox_node_with_broker('restricted',
	$registry ? ('outbox.schema_registry_url' => $registry->{url}) : ());

# The owner's trigger does what owner_code.act says for its table:
# 'settings' sets search_path and work_mem for the session, 'temp' creates
# a temporary table; it notes in owner_code.ran as whom it ran and the
# work_mem it saw.
$node->safe_psql(
	'postgres', q{
	DROP EXTENSION outbox;
	CREATE ROLE ext_owner LOGIN SUPERUSER;
	SET ROLE ext_owner;
	CREATE EXTENSION outbox;
	CREATE SCHEMA owner_code;
	CREATE TABLE owner_code.act (tbl name PRIMARY KEY, action text);
	CREATE TABLE owner_code.ran (tbl name, ran_as name, work_mem text);
	CREATE FUNCTION owner_code.act() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		what text;
	BEGIN
		SELECT a.action INTO what FROM owner_code.act a WHERE a.tbl = TG_TABLE_NAME;
		IF what = 'settings' THEN
			PERFORM pg_catalog.set_config('search_path', 'evil, public', false);
			PERFORM pg_catalog.set_config('work_mem', '4711kB', false);
		ELSIF what = 'temp' THEN
			CREATE TEMP TABLE planted (x int);
		END IF;
		INSERT INTO owner_code.ran VALUES (TG_TABLE_NAME, current_user,
										   pg_catalog.current_setting('work_mem'));
		RETURN NEW;
	END $$;
	CREATE TRIGGER act BEFORE INSERT OR UPDATE ON outbox_attached
		FOR EACH ROW EXECUTE FUNCTION owner_code.act();
	CREATE TRIGGER act BEFORE INSERT ON outbox_snapshots_state
		FOR EACH ROW EXECUTE FUNCTION owner_code.act();
	CREATE TRIGGER act BEFORE INSERT ON outbox_schema_ids
		FOR EACH ROW EXECUTE FUNCTION owner_code.act();
	RESET ROLE;
	ALTER ROLE ext_owner NOSUPERUSER;
	CREATE ROLE app LOGIN;
	CREATE SCHEMA app AUTHORIZATION app;
	GRANT EXECUTE ON FUNCTION outbox_attach(regclass, text, text[], text, boolean, boolean,
		text, text, boolean, text, boolean), outbox_capture() TO app;
});

# Set what the trigger does on $tbl (the others do nothing), and forget
# what it noted.
sub act
{
	my ($tbl, $action) = @_;
	$node->safe_psql('postgres',
		"TRUNCATE owner_code.act, owner_code.ran; INSERT INTO owner_code.act VALUES ('$tbl', '$action')"
	);
	return;
}

# Run $sql in one session of app, which sets work_mem first, going on
# after an error; the SQLSTATE and message of the first error ('' if
# none), and what the session prints last: its search_path, work_mem,
# current user and whether it may create a temporary table.
sub as_app
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql(
		'postgres', qq{\\set VERBOSITY verbose
SET work_mem = '1234kB';
$sql
CREATE TEMP TABLE mine (x int);
SELECT current_setting('search_path') || ' | ' || current_setting('work_mem') || ' | '
	|| current_user || ' | ' || count(*)
  FROM pg_class WHERE relname = 'mine' AND relnamespace = pg_my_temp_schema();
},
		extra_params => [ '-U', 'app' ],
		on_error_stop => 0);
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/;
	my @lines = split /\n/, $out;
	return ($state // '', $lines[-1] // '', $err);
}

my $unchanged = '"$user", public | 1234kB | app | 1';
my $refused = '42501: cannot create temporary table within security-restricted operation';

# Table $name of app, with a primary key.
sub app_table
{
	my ($name) = @_;
	$node->safe_psql('postgres',
		"CREATE TABLE app.$name (id int PRIMARY KEY, v text); ALTER TABLE app.$name OWNER TO app");
	return;
}

# --- outbox_attached, written by outbox_attach
app_table('t1');
act('outbox_attached', 'settings');
my ($state, $last) = as_app("SELECT outbox_attach('app.t1', 'restricted.t1');");
is($state, '', 'outbox_attach: the owner\'s trigger changing settings does not fail it');
is($node->safe_psql('postgres', 'SELECT tbl || \' \' || ran_as || \' \' || work_mem FROM owner_code.ran'),
	'outbox_attached ext_owner 4711kB',
	'the trigger ran, as the extension\'s owner, and set work_mem for its statement');
is($last, $unchanged, 'outbox_attach: the application\'s session keeps its settings');

app_table('t2');
act('outbox_attached', 'temp');
my $err;
($state, $last, $err) = as_app("SELECT outbox_attach('app.t2', 'restricted.t2');");
is($state, $refused, 'outbox_attach: the owner\'s trigger may not create a temporary table');
like( $err,
	qr/CONTEXT:  SQL statement "CREATE TEMP TABLE planted \(x int\)"\nPL\/pgSQL function owner_code\.act\(\) line \d+ at SQL statement\nSQL statement "INSERT INTO public\.outbox_attached /,
	'the error names the trigger\'s function and the extension\'s statement');
is($last, $unchanged, 'the session goes on as app, unrestricted, with its settings');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'app.t2'::regclass"),
	'0', 'and the table is not attached');

# an error caught in the application's subtransaction: after it, app
# again, not restricted
($state, $last, $err) = as_app(q{DO $$
BEGIN
	BEGIN
		PERFORM outbox_attach('app.t2', 'restricted.t2');
	EXCEPTION WHEN insufficient_privilege THEN
		RAISE NOTICE 'caught: %', SQLERRM;
	END;
	CREATE TEMP TABLE after_caught (x int);
	RAISE NOTICE 'then % made a temporary table', current_user;
END $$;});
is($state, '', 'an error caught in a subtransaction: the block goes on');
like($err, qr/caught: cannot create temporary table within security-restricted operation/,
	'it caught the refusal');
like($err, qr/then app made a temporary table/,
	'then, as app, it may create a temporary table');
is($last, $unchanged, 'and the session keeps its settings');

# --- outbox_snapshots_state, written by outbox_attach(snapshot => true)
app_table('t3');
act('outbox_snapshots_state', 'settings');
($state, $last) = as_app("SELECT outbox_attach('app.t3', 'restricted.t3', snapshot => true);");
is($state, '', 'a snapshot asked for: the owner\'s trigger changing settings does not fail it');
is( $node->safe_psql('postgres',
		"SELECT string_agg(tbl || ' ' || ran_as || ' ' || work_mem, ', ' ORDER BY tbl) FROM owner_code.ran"),
	'outbox_attached ext_owner 1234kB, outbox_snapshots_state ext_owner 4711kB',
	'the trigger ran as the extension\'s owner');
is($last, $unchanged, 'a snapshot asked for: the application\'s session keeps its settings');

app_table('t4');
act('outbox_snapshots_state', 'temp');
($state, $last) = as_app("SELECT outbox_attach('app.t4', 'restricted.t4', snapshot => true);");
is($state, $refused, 'a snapshot asked for: the owner\'s trigger may not create a temporary table');
is($last, $unchanged, 'the session goes on as app, unrestricted, with its settings');

# --- outbox_schema_ids, written when a change captured with the Avro
# converter registers a schema
SKIP:
{
	skip "the test schema registry needs avsc: $no_avsc", 5 if $no_avsc;

	app_table('t5');
	act('outbox_schema_ids', 'settings');
	($state, $last) = as_app(
		"SELECT outbox_attach('app.t5', 'restricted', format => 'debezium', converter => 'avro');
		 INSERT INTO app.t5 VALUES (1, 'a');");
	is($state, '', 'an Avro schema kept: the owner\'s trigger changing settings does not fail it');
	is( $node->safe_psql('postgres',
			"SELECT string_agg(DISTINCT tbl || ' ' || ran_as || ' ' || work_mem, ', ') FROM owner_code.ran WHERE tbl = 'outbox_schema_ids'"
		),
		'outbox_schema_ids ext_owner 4711kB',
		'the trigger ran as the extension\'s owner');
	is($last, $unchanged, 'an Avro schema kept: the application\'s session keeps its settings');

	app_table('t6');
	act('outbox_schema_ids', 'temp');
	($state, $last) = as_app(
		"SELECT outbox_attach('app.t6', 'restricted', format => 'debezium', converter => 'avro');
		 INSERT INTO app.t6 VALUES (1, 'a');");
	is($state, $refused,
		'an Avro schema kept: the owner\'s trigger may not create a temporary table');
	is($last, $unchanged, 'the session goes on as app, unrestricted, with its settings');
}

$node->stop;
$broker->stop;
done_testing();
