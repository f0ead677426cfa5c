#!/bin/bash
#
# Prepare a Debian bookworm machine, as root: install the packages the
# extension and its tests need, then build (warnings are errors) and
# install the extension.  Used by test/run.sh, test/demo.sh and CI.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACKAGES="postgresql-15 postgresql-server-dev-15 librdkafka-dev libcurl4-openssl-dev
	libavro-dev kcat pkg-config
	make gcc libipc-run-perl python3-confluent-kafka python3-psycopg2
	postgresql-15-pgq3 prometheus-postgres-exporter prometheus nodejs curl openssl procps"

if [ "$(id -u)" != 0 ]; then
	echo "test/setup.sh: run as root (it installs packages)" >&2
	exit 1
fi

# shellcheck disable=SC2086
if ! dpkg -s $PACKAGES >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q $PACKAGES
fi
# npm, which t/020_drivers.pl installs node's pg with: Debian's package,
# unless the nodejs installed brings its own; without it that test skips
# node's pg and says why
if ! command -v npm >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm ||
		echo "test/setup.sh: npm could not be installed" >&2
fi

export PATH="/usr/lib/postgresql/15/bin:$PATH"
make -C "$ROOT" -s COPT=-Werror
make -C "$ROOT" -s COPT=-Werror test-programs
make -C "$ROOT" -s install
