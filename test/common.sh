# Sourced by the test, demo and benchmark scripts.
#
# become_postgres ROOT SCRIPT [ARGS...]
#	PostgreSQL refuses to run as root.  As root: prepare the machine
#	(test/setup.sh), copy the repository ROOT to a scratch directory the
#	postgres user owns, and run ROOT/SCRIPT again in the copy as that user,
#	with OUTBOX_WORK set to the scratch directory; does not return.
#	Otherwise: make sure OUTBOX_WORK names a scratch directory, put
#	PostgreSQL's programs (PG_BINDIR, by default Debian's) first in PATH,
#	and return.  OUTBOX_WORK_MADE is 1 if the scratch directory was made
#	here (the script may remove it), empty if the caller named it.
#
# start_mock_broker ROOT DIR
#	Start a one-broker Kafka-protocol cluster (ROOT/test/mock_broker) with
#	its control input kept open on fd 3 and its files in DIR; sets BROKERS
#	(the bootstrap list) and BROKER_PID.
#
# init_outbox_server DATADIR PORT DATABASE
#	initdb DATADIR for a server with the library preloaded, its worker
#	publishing from DATABASE to $BROKERS, listening on PORT on a Unix socket
#	in $OUTBOX_WORK only.  Callers append their own settings.

become_postgres() {
	local root=$1 script=$2
	shift 2
	if [ "$(id -u)" = 0 ]; then
		"$root/test/setup.sh" || return 1
		OUTBOX_WORK=$(mktemp -d /tmp/outbox.XXXXXX)
		cp -a "$root" "$OUTBOX_WORK/repo"
		chown -R postgres "$OUTBOX_WORK"
		# from the copy: the clone may be where postgres cannot go (/root),
		# and test paths given are relative to it
		cd "$OUTBOX_WORK/repo" || return 1
		exec runuser -u postgres -- env OUTBOX_WORK="$OUTBOX_WORK" OUTBOX_WORK_MADE=1 \
			"$OUTBOX_WORK/repo/$script" "$@"
	fi
	if [ -z "${OUTBOX_WORK:-}" ]; then
		OUTBOX_WORK=$(mktemp -d /tmp/outbox.XXXXXX)
		OUTBOX_WORK_MADE=1
	fi
	OUTBOX_WORK_MADE=${OUTBOX_WORK_MADE:-}
	export OUTBOX_WORK OUTBOX_WORK_MADE
	export PATH="${PG_BINDIR:-/usr/lib/postgresql/15/bin}:$PATH"
}

start_mock_broker() {
	local root=$1 dir=$2
	mkfifo "$dir/broker.in"
	"$root/test/mock_broker" 1 < "$dir/broker.in" > "$dir/broker.out" 2>&1 &
	BROKER_PID=$!
	exec 3> "$dir/broker.in"
	until [ -s "$dir/broker.out" ]; do sleep 0.1; done
	BROKERS=$(head -1 "$dir/broker.out")
}

init_outbox_server() {
	local data=$1 port=$2 database=$3
	initdb -D "$data" -A trust >/dev/null
	cat >> "$data/postgresql.conf" <<CONF
shared_preload_libraries = 'outbox'
outbox.databases = '$database'
outbox.brokers = '$BROKERS'
port = $port
unix_socket_directories = '$OUTBOX_WORK'
listen_addresses = ''
CONF
}
