#!/bin/bash
#
# Build the Debian package postgresql-15-outbox from a clean tree (a git
# archive of HEAD, in a temporary directory), check what it holds, validate
# META.json, install the package and run the demo (test/demo.sh) against the
# installed package: a server of that installation, the library and scripts
# of the package, the mock broker and kcat.
#
# Usage: test/package.sh [--extract DIR | --install] [--keep]
#
#   --extract DIR	(the default, DIR = /opt/pgP) unpack the package with
#			dpkg-deb -x into DIR, a relocated copy of Debian's
#			PostgreSQL 15 (DIR/usr/lib/postgresql/15/bin finds its
#			libraries and extensions under DIR), and run the demo
#			with PG_BINDIR=DIR/usr/lib/postgresql/15/bin.  Writes
#			nothing outside DIR and the temporary directory.
#   --install		apt-get install the package into the system (as root,
#			on a fresh machine: CI) and run the demo against
#			/usr/lib/postgresql/15.
#   --keep		keep the temporary directory (it is kept anyway when a
#			check failed); its path is printed.
#
# The package stays installed (in DIR, or in the system).  As root, the demo
# runs as the postgres user.  Needs the packages of debian/control's
# Build-Depends, build-essential, dpkg-dev, git, kcat, python3-jsonschema,
# and lintian for its check (.ci/run installs them).
#
# Prints a PASS or FAIL line per check, and last "N passed, N failed"; exits
# non-zero if any check failed.

set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=extract
DIR=/opt/pgP
KEEP=
PKG=postgresql-15-outbox
PGMAJOR=15
DEMO_PORT=54329		# test/demo.sh's

usage() {
	echo "usage: test/package.sh [--extract DIR | --install] [--keep]" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
		--extract)
			[ $# -ge 2 ] || usage
			MODE=extract DIR=$2
			shift 2 ;;
		--install) MODE=install; shift ;;
		--keep) KEEP=1; shift ;;
		*) usage ;;
	esac
done

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() {			# check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

# --- what is needed
missing=
for cmd in git dpkg-buildpackage dpkg-deb dpkg-parsechangelog pg_buildext dh \
		pkg-config cc make kcat /usr/bin/python3; do
	command -v "$cmd" >/dev/null || missing="$missing $cmd"
done
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || missing="$missing python3-jsonschema"
if [ -n "$missing" ]; then
	fail "tools present (missing:$missing; apt-get install debhelper postgresql-server-dev-all librdkafka-dev pkg-config build-essential dpkg-dev git kcat python3-jsonschema lintian)"
	finish
fi
if [ "$MODE" = install ]; then
	PG_BINDIR=/usr/lib/postgresql/$PGMAJOR/bin
	if [ "$(id -u)" != 0 ]; then
		fail "--install runs as root (it installs the package)"
		finish
	fi
else
	DIR=$(realpath -m "$DIR")
	PG_BINDIR=$DIR/usr/lib/postgresql/$PGMAJOR/bin
	if [ ! -x "$PG_BINDIR/postgres" ] || [ ! -x "$PG_BINDIR/pg_config" ]; then
		fail "$DIR holds a PostgreSQL $PGMAJOR copy ($PG_BINDIR/postgres, pg_config)"
		finish
	fi
fi
PKGLIBDIR=$("$PG_BINDIR/pg_config" --pkglibdir 2>/dev/null) || PKGLIBDIR=
SHAREDIR=$("$PG_BINDIR/pg_config" --sharedir 2>/dev/null) || SHAREDIR=
if [ "$MODE" = extract ]; then
	# the copy must look for its files under DIR, where the package goes
	check "$PG_BINDIR/postgres loads libraries from $DIR/usr/lib/postgresql/$PGMAJOR/lib" \
		[ "$PKGLIBDIR" = "$DIR/usr/lib/postgresql/$PGMAJOR/lib" ]
	check "$PG_BINDIR/postgres reads extensions from $DIR/usr/share/postgresql/$PGMAJOR" \
		[ "$SHAREDIR" = "$DIR/usr/share/postgresql/$PGMAJOR" ]
	[ "$failed" = 0 ] || finish
fi

# --- a clean tree in a temporary directory; everything is torn down at exit
TMP=$(mktemp -d /tmp/outbox-package.XXXXXX)
chmod 755 "$TMP"		# the demo's user reads its tree here
cd "$TMP" || exit 1
WORK=$TMP/work
BROKER_PID=

cleanup() {
	local pid p
	if [ -f "$WORK/data/postmaster.pid" ]; then
		pid=$(head -1 "$WORK/data/postmaster.pid")
		kill -INT "$pid" 2>/dev/null	# fast shutdown
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	# the mock broker: the pid the demo printed, and any process left
	# running from this run's copy of it
	[ -n "$BROKER_PID" ] && kill "$BROKER_PID" 2>/dev/null
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/exe" 2>/dev/null)" = "$TMP/demo/test/mock_broker" ]; then
			kill "${p#/proc/}" 2>/dev/null
		fi
	done
	if [ -n "$KEEP" ] || [ "$failed" != 0 ]; then
		echo "kept: $TMP"
	else
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD) || { fail "$ROOT is a git repository"; finish; }
VERSION=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -SVersion)
UPSTREAM=${VERSION%-*}
ARCH=$(dpkg --print-architecture)
SRC=$TMP/outbox-$UPSTREAM
echo "--- building $PKG $VERSION from a git archive of HEAD ($COMMIT) in $TMP"
git -C "$ROOT" archive --format=tar --prefix="outbox-$UPSTREAM/" HEAD | tar -x -C "$TMP"
tar -C "$TMP" -czf "$TMP/outbox_$UPSTREAM.orig.tar.gz" \
	--exclude="outbox-$UPSTREAM/debian" "outbox-$UPSTREAM"
(cd "$SRC" && dpkg-buildpackage -us -uc) > "$TMP/build.log" 2>&1
DEB=$TMP/${PKG}_${VERSION}_$ARCH.deb
if [ -f "$DEB" ]; then
	pass "dpkg-buildpackage built $(basename "$DEB") (and the source package)"
else
	tail -40 "$TMP/build.log"
	fail "dpkg-buildpackage builds $(basename "$DEB") (log: $TMP/build.log)"
	finish
fi

# --- what the package holds
echo "--- contents"
CONTENT=$TMP/content
dpkg-deb -x "$DEB" "$CONTENT"
LIB=usr/lib/postgresql/$PGMAJOR/lib
EXT=usr/share/postgresql/$PGMAJOR/extension
check "the package has $LIB/outbox.so" [ -f "$CONTENT/$LIB/outbox.so" ]
check "the package has $EXT/outbox.control, the tree's" \
	cmp -s "$CONTENT/$EXT/outbox.control" "$SRC/outbox.control"
for script in "$SRC"/outbox--*.sql "$SRC"/monitoring/*.yml "$SRC"/monitoring/*.yaml; do
	check "the package has $EXT/$(basename "$script"), the tree's" \
		cmp -s "$CONTENT/$EXT/$(basename "$script")" "$script"
done
elves=$(find "$CONTENT" -type f -exec sh -c \
	'for f; do head -c 4 "$f" | grep -q "^.ELF" && echo "${f#'"$CONTENT"'/}"; done' sh {} +)
check "no program but outbox.so in the package (ELF files: $(paste -sd " " <<<"$elves"))" \
	[ "$elves" = "$LIB/outbox.so" ]
test_programs=$(sed -n 's/^TEST_PROGRAMS = //p' "$SRC/Makefile")
leaked=
for prog in test/mock_broker test/bench/producer $test_programs; do
	if find "$CONTENT" -name "$(basename "$prog")" | grep -q .; then
		leaked="$leaked $prog"
	fi
done
check "no test program in the package${leaked:+ (found:$leaked)}" [ -z "$leaked" ]
deb_package=$(dpkg-deb -f "$DEB" Package)
deb_depends=$(dpkg-deb -f "$DEB" Depends)
echo "    Depends: $deb_depends"
check "control: Package $PKG, Version $VERSION" \
	[ "$deb_package $(dpkg-deb -f "$DEB" Version)" = "$PKG $VERSION" ]
check "control: Depends on postgresql-$PGMAJOR" \
	grep -qE "(^|, )postgresql-$PGMAJOR( |,|$)" <<<"$deb_depends"
check "control: Depends on librdkafka1 (from the library's shlibs)" \
	grep -qE "(^|, )librdkafka1( |,|$)" <<<"$deb_depends"

# --- META.json
echo "--- META.json"
VALIDATE="/usr/bin/python3 $SRC/test/validate_meta.py"
if out=$($VALIDATE "$SRC/META.json" 2>&1); then
	pass "META.json follows the PGXN Meta Spec 1.0.0"
else
	echo "$out" | sed 's/^/    /'
	fail "META.json follows the PGXN Meta Spec 1.0.0"
fi
# the checker must refuse a broken META.json
for breakage in \
	'provides.outbox.version 1.2 (not a semantic version)|m.setdefault("provides", {}).setdefault("outbox", {})["version"] = "1.2"' \
	'no license|m.pop("license", None)' \
	'license "PostgreSQL License"|m["license"] = "PostgreSQL License"' \
	'an unknown key|m["homepage"] = "https://example.org"' \
	'prereq PostgreSQL 15.0|m.setdefault("prereqs", {}).setdefault("runtime", {}).setdefault("requires", {})["PostgreSQL"] = "15.0"'; do
	what=${breakage%%|*}
	rm -f "$TMP/META.broken.json"
	if ! /usr/bin/python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(m, open(sys.argv[3], "w"))' "$SRC/META.json" "${breakage#*|}" "$TMP/META.broken.json"; then
		fail "a copy of META.json with $what can be made"
		continue
	fi
	out=$($VALIDATE "$TMP/META.broken.json" 2>&1)
	rc=$?
	if [ "$rc" = 1 ] && grep -q 'NOT valid' <<<"$out"; then
		pass "the META.json check refuses a copy with $what"
	else
		echo "$out" | sed 's/^/    /'
		fail "the META.json check refuses a copy with $what (exit $rc)"
	fi
done
meta() { /usr/bin/python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    m = m[k]
print(m)' "$SRC/META.json" "$@"; }
check "META.json version $(meta version) is the Debian package's upstream version $UPSTREAM" \
	[ "$(meta version)" = "$UPSTREAM" ]
control_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$SRC/outbox.control")
meta_ext_version=$(meta provides outbox version)
meta_ext_file=$(meta provides outbox file)
if [ "$meta_ext_version" = "$control_version.0" ] || [ "$meta_ext_version" = "$control_version" ]; then
	check "META.json's provides.outbox.file $meta_ext_file is in the tree" \
		[ -f "$SRC/$meta_ext_file" ]
else
	echo "NOTE: META.json provides outbox $meta_ext_version ($meta_ext_file), the tree is at" \
		"$control_version (outbox.control): not checked until they agree"
fi

# --- lintian
if command -v lintian >/dev/null; then
	echo "--- lintian"
	lintian --info "$TMP/outbox_${VERSION}_$ARCH.changes" > "$TMP/lintian.out" 2>&1
	rc=$?
	grep -E '^[EWI]: ' "$TMP/lintian.out" | sed 's/^/    /'
	check "lintian reports no error" [ "$rc" = 0 ]
else
	echo "SKIP: lintian is not installed"
fi

# --- install
echo "--- installing ($MODE)"
if [ "$MODE" = install ]; then
	# --reinstall: the same version installed before (a second run on this
	# machine) is replaced too, with the files make install overwrote
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall "$DEB" > "$TMP/install.log" 2>&1
	check "apt-get install ./$(basename "$DEB")" \
		[ "$(dpkg-query -W -f '${Status} ${Version}' "$PKG" 2>/dev/null)" = "install ok installed $VERSION" ]
else
	# the previous install of the package goes first, as dpkg would do
	rm -rf "$PKGLIBDIR/outbox.so" "$PKGLIBDIR/bitcode/outbox" "$PKGLIBDIR/bitcode/outbox.index.bc" \
		"$SHAREDIR/extension/outbox.control" "$SHAREDIR"/extension/outbox--*.sql \
		"$DIR/usr/share/doc/$PKG"
	# dpkg-deb -x gives the directories on its way the package's owners
	# and modes: those DIR already had are put back
	dpkg-deb -c "$DEB" | awk '$1 ~ /^d/ { print $NF }' | while read -r d; do
		[ -d "$DIR/${d#./}" ] && stat -c '%u:%g %a %n' "$DIR/${d#./}"
	done > "$TMP/dir-owners"
	dpkg-deb -x "$DEB" "$DIR"
	while read -r owner mode path; do
		[ "$(id -u)" = 0 ] && chown "$owner" "$path"
		chmod "$mode" "$path"
	done < "$TMP/dir-owners"
	echo "    $PKG $VERSION unpacked into $DIR (left there)"
fi
check "$PKGLIBDIR/outbox.so is the package's" cmp -s "$PKGLIBDIR/outbox.so" "$CONTENT/$LIB/outbox.so"
check "$SHAREDIR/extension/outbox.control is the package's" \
	cmp -s "$SHAREDIR/extension/outbox.control" "$CONTENT/$EXT/outbox.control"

# --- the demo, from another clean tree that has only the mock broker built
echo "--- the demo (test/demo.sh) with PG_BINDIR=$PG_BINDIR"
mkdir "$TMP/demo" "$WORK"
git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$TMP/demo"
if ! make -s -C "$TMP/demo" test/mock_broker PG_CONFIG="$PG_BINDIR/pg_config" > "$TMP/mock_broker.log" 2>&1; then
	cat "$TMP/mock_broker.log"
	fail "the mock broker builds"
	finish
fi
check "the demo's tree holds no build of the extension" \
	[ -z "$(find "$TMP/demo" -name 'outbox.so' -o -name '*.o' -o -name '*.bc')" ]
as_user=()
if [ "$(id -u)" = 0 ]; then
	chown -R postgres "$TMP/demo" "$WORK"
	as_user=(runuser -u postgres --)
fi
# --keep leaves the server and the broker running, to be looked at below
"${as_user[@]}" env PG_BINDIR="$PG_BINDIR" OUTBOX_WORK="$WORK" \
	bash "$TMP/demo/test/demo.sh" --keep > "$TMP/demo.out" 2>&1
rc=$?
sed 's/^/    /' "$TMP/demo.out"
BROKER_PID=$(sed -n 's/^--- left running: .*(pid \([0-9]*\))$/\1/p' "$TMP/demo.out")
check "test/demo.sh ran (exit $rc)" [ "$rc" = 0 ]

# what kcat printed: a "partition ... headers ..." line and the payload,
# per event
kafka=$(sed -n '/^--- what arrived in Kafka/,/^--- the rolled-back/p' "$TMP/demo.out")
in_kafka() { grep -qF -- "$1" <<<"$kafka"; }
check "Kafka received 2 events" [ "$(grep -c '^partition ' <<<"$kafka")" = 2 ]
check "Kafka received order 1 with its header source=demo, then its update" \
	eval 'in_kafka "source=demo" && in_kafka "{\"id\": 1, \"total\": 9.99}" &&
		in_kafka "{\"id\": 1, \"status\": \"shipped\"}"'
check "the rolled-back order 2 never arrived" eval '! in_kafka "\"id\": 2"'

# the server the demo ran: its program, its library, its extension
pid=$(head -1 "$WORK/data/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
	check "the server is $PG_BINDIR/postgres" [ "$(readlink "/proc/$pid/exe")" = "$PG_BINDIR/postgres" ]
	loaded=$(grep -o '/[^ ]*outbox\.so' "/proc/$pid/maps" | sort -u)
	check "the server loaded $PKGLIBDIR/outbox.so, the package's (loaded: $loaded)" \
		[ "$loaded" = "$PKGLIBDIR/outbox.so" ]
	q() { "${as_user[@]}" "$PG_BINDIR/psql" -X -At -h "$WORK" -p "$DEMO_PORT" -d postgres -c "$1"; }
	check "CREATE EXTENSION made outbox $control_version, the default_version of the package's control file" \
		[ "$(q "SELECT extversion FROM pg_extension WHERE extname = 'outbox'")" = "$control_version" ]
	check "outbox_messages says 2 events published" \
		[ "$(q "SELECT count(*) FROM outbox_messages WHERE status = 'published'")" = 2 ]
	"${as_user[@]}" "$PG_BINDIR/pg_ctl" -D "$WORK/data" -m fast -w stop > /dev/null
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	check "the server stopped" eval '! kill -0 "$pid" 2>/dev/null'
else
	fail "the demo's server was left running by --keep, to be looked at"
fi
if [ -n "$BROKER_PID" ]; then
	kill "$BROKER_PID" 2>/dev/null
	for _ in $(seq 1 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
	check "the mock broker stopped" eval '! kill -0 "$BROKER_PID" 2>/dev/null'
fi

finish
