#!/usr/bin/env bash
# testenv.sh gives tests real services: a MinIO server and a PostgreSQL
# server on free loopback ports, in a temporary directory that is removed
# afterwards, and an OpenTelemetry Collector binary that tests start
# themselves as their OTLP receiver.
#
#   scripts/testenv.sh run -- CMD ARGS...   start both, run CMD, stop both
#   scripts/testenv.sh install              install the pinned MinIO, toxiproxy and Collector only
#
# CMD sees DEX_TEST_S3_ENDPOINT, DEX_TEST_S3_BUCKET, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_REGION, DEX_TEST_POSTGRES_DSN and
# DEX_TEST_OTELCOL (the Collector's path). The bucket is created by the
# tests' helper (internal/testenv) at first use. The chaos tests
# (test/chaos), which start, kill and restart services of their own, also
# see DEX_TEST_MINIO_BIN, DEX_TEST_TOXIPROXY_BIN and DEX_TEST_PG_BIN (the
# PostgreSQL bin directory). The script exits with CMD's status.
#
# PostgreSQL also serves TLS (ssl = on), with a server certificate for
# 127.0.0.1 and localhost issued by a CA made for this run with openssl:
# DEX_TEST_POSTGRES_CA_FILE is that CA's certificate, for sslmode=verify-full.
# DEX_TEST_MINIO_BIN also serves tests that start a MinIO of their own over
# HTTPS, with a certificate they make.
#
# The web UI's browser tests (test/webui) drive Debian's chromium, named by
# DEX_TEST_CHROMIUM: as root the script installs it with apt-get when it is
# missing, at CHROMIUM_VERSION when the archive still has that version (a
# security update replaces it there), else at the archive's candidate,
# which it logs.
#
# MinIO and toxiproxy are built with `go install` into .tools/bin at the
# versions pinned below. The Collector is the OpenTelemetry Collector
# Builder's build of the core OTLP receiver and debug exporter only (the
# smallest Collector that receives OTLP and shows what it got), at the
# pinned version: the builder is installed with `go install`, then builds
# it into .tools/bin/otelcol-dex. Each is built once and kept, with a stamp
# of its version. PostgreSQL comes from Debian (/usr/lib/postgresql/N/bin);
# as root the script installs it with apt-get when it is missing and runs
# it as the postgres user, since initdb refuses to run as root.
set -euo pipefail

readonly MINIO_MODULE=github.com/minio/minio
readonly MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
readonly OTELCOL_VERSION=v0.165.0
readonly OTELCOL_BUILDER_MODULE=go.opentelemetry.io/collector/cmd/builder
readonly TOXIPROXY_MODULE=github.com/Shopify/toxiproxy/v2
readonly TOXIPROXY_VERSION=v2.12.0
readonly WAIT_SECONDS=60
readonly CHROMIUM_VERSION=156.0.8078.114-1~deb12u1

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly TOOLS="$REPO/.tools/bin"
readonly MINIO="$TOOLS/minio"
readonly MINIO_STAMP="$TOOLS/minio.version"
readonly OTELCOL="$TOOLS/otelcol-dex"
readonly OTELCOL_STAMP="$TOOLS/otelcol-dex.version"
readonly TOXIPROXY="$TOOLS/toxiproxy-server"
readonly TOXIPROXY_STAMP="$TOOLS/toxiproxy.version"

log() { printf 'testenv: %s\n' "$*" >&2; }
die() {
	printf 'testenv: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
	exit 2
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# --- tools -------------------------------------------------------------------

find_go() {
	if command -v go >/dev/null 2>&1; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then
		echo /usr/local/go/bin/go
	else
		die "go not found on PATH or at /usr/local/go/bin/go; it is needed to build MinIO and toxiproxy"
	fi
}

# tool_installed BIN STAMP VERSION reports whether BIN is there at VERSION.
tool_installed() {
	[[ -x $1 && -f $2 && $(<"$2") == "$3" ]]
}

# install_tool NAME PACKAGE VERSION BIN STAMP builds PACKAGE@VERSION with go
# install, outside the repo so that its go.mod and GOFLAGS play no part, and
# installs the command (which go install names after the package's last
# element) as BIN; STAMP records VERSION. Runs started side by side install
# once.
install_tool() {
	local name=$1 pkg=$2 version=$3 bin=$4 stamp=$5
	if tool_installed "$bin" "$stamp" "$version"; then
		return
	fi
	mkdir -p "$TOOLS"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$TOOLS/.$name.lock"
		flock 9
		if tool_installed "$bin" "$stamp" "$version"; then
			exec 9>&-
			return
		fi
	fi
	local go gobin
	go=$(find_go)
	log "installing $name $version into $TOOLS (a few minutes the first time)"
	rm -f "$stamp" "$bin"
	gobin=$(mktemp -d "$TOOLS/.build.XXXXXX")
	if ! (cd / && GOBIN="$gobin" GOFLAGS=-buildvcs=false "$go" install "$pkg@$version"); then
		rm -rf "$gobin"
		die "go install $pkg@$version failed"
	fi
	mv "$gobin/${pkg##*/}" "$bin"
	rm -rf "$gobin"
	echo "$version" >"$stamp"
	exec 9>&-
}

otelcol_installed() {
	[[ -x $OTELCOL && -f $OTELCOL_STAMP && $(<"$OTELCOL_STAMP") == "$OTELCOL_VERSION" ]]
}

# install_otelcol builds the test Collector: the builder at the pinned
# version, then, from a manifest naming the core OTLP receiver and debug
# exporter at the same version, the Collector itself.
install_otelcol() {
	if otelcol_installed; then
		return
	fi
	mkdir -p "$TOOLS"
	if command -v flock >/dev/null 2>&1; then
		exec 8>"$TOOLS/.otelcol.lock"
		flock 8
		if otelcol_installed; then
			exec 8>&-
			return
		fi
	fi
	local go build
	go=$(find_go)
	log "installing the OpenTelemetry Collector $OTELCOL_VERSION (OTLP receiver, debug exporter) into $TOOLS (a few minutes the first time)"
	rm -f "$OTELCOL_STAMP" "$OTELCOL"
	build=$(mktemp -d "${TMPDIR:-/tmp}/dex-otelcol.XXXXXX")
	(cd / && GOBIN="$build/bin" GOFLAGS=-buildvcs=false "$go" install "$OTELCOL_BUILDER_MODULE@$OTELCOL_VERSION") ||
		die "go install $OTELCOL_BUILDER_MODULE@$OTELCOL_VERSION failed"
	cat >"$build/manifest.yaml" <<MANIFEST
dist:
  name: otelcol-dex
  description: OTLP receiver for the Dex-ZD tests
  output_path: $build/dist
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $OTELCOL_VERSION
MANIFEST
	(cd "$build" && GOFLAGS=-buildvcs=false "$build/bin/builder" --config "$build/manifest.yaml" >"$build/builder.log" 2>&1) || {
		tail -n 40 "$build/builder.log" >&2
		die "building the Collector failed"
	}
	cp "$build/dist/otelcol-dex" "$OTELCOL"
	rm -rf "$build"
	echo "$OTELCOL_VERSION" >"$OTELCOL_STAMP"
	exec 8>&-
}

install_minio() { install_tool minio "$MINIO_MODULE" "$MINIO_VERSION" "$MINIO" "$MINIO_STAMP"; }

# toxiproxy's server is its cmd/server, installed as toxiproxy-server.
install_toxiproxy() {
	install_tool toxiproxy "$TOXIPROXY_MODULE/cmd/server" "$TOXIPROXY_VERSION" "$TOXIPROXY" "$TOXIPROXY_STAMP"
}

# find_pg_bin prints the bin directory of the newest PostgreSQL under
# /usr/lib/postgresql that has initdb and pg_ctl.
find_pg_bin() {
	local dir best=""
	for dir in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V); do
		if [[ -x $dir/initdb && -x $dir/pg_ctl ]]; then
			best=$dir
		fi
	done
	echo "$best"
}

ensure_postgres() {
	PG_BIN=$(find_pg_bin)
	if [[ -n $PG_BIN ]]; then
		return
	fi
	apt_install postgresql "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin"
	PG_BIN=$(find_pg_bin)
	[[ -n $PG_BIN ]] || die "PostgreSQL installed, but no initdb and pg_ctl under /usr/lib/postgresql/*/bin"
}

chromium_pinned_available() {
	apt-cache madison chromium 2>/dev/null | awk -v v="$CHROMIUM_VERSION" '$3 == v { found = 1 } END { exit !found }'
}

# ensure_chromium sets CHROMIUM to Debian's chromium, installing it (pinned
# where the archive allows) when missing.
ensure_chromium() {
	CHROMIUM=$(command -v chromium || true)
	if [[ -n $CHROMIUM ]]; then
		return
	fi
	if ! is_root; then
		die "chromium not found (the web UI's browser tests need it); install it with: sudo apt-get install -y chromium"
	fi
	local pkg=chromium
	apt-get update -qq >&2 || die "apt-get update failed"
	if chromium_pinned_available; then
		pkg="chromium=$CHROMIUM_VERSION"
	else
		log "chromium $CHROMIUM_VERSION is no longer in the archive; installing its candidate"
	fi
	apt_install "$pkg" "chromium not found (the web UI's browser tests need it)"
	CHROMIUM=$(command -v chromium || true)
	[[ -n $CHROMIUM ]] || die "chromium installed, but not on PATH"
}

ensure_openssl() {
	if command -v openssl >/dev/null 2>&1; then
		return
	fi
	apt_install openssl "openssl not found"
}

# apt_install installs the Debian package PKG as root, or dies with WHY and
# the command to run when not root.
apt_install() {
	local pkg=$1 why=$2
	if ! is_root; then
		die "$why; install it with: sudo apt-get install -y $pkg"
	fi
	log "installing $pkg with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	apt-get install -y -qq "$pkg" >&2 || die "apt-get install $pkg failed"
}

# --- helpers -----------------------------------------------------------------

random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

port_in_use() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a loopback port nobody listens on, different from the
# ports given as arguments.
free_port() {
	local port
	for _ in $(seq 1 50); do
		if command -v python3 >/dev/null 2>&1; then
			port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
		else
			port=$((20000 + RANDOM % 40000))
			if port_in_use "$port"; then
				continue
			fi
		fi
		if [[ " $* " != *" $port "* ]]; then
			echo "$port"
			return
		fi
	done
	die "no free loopback port found"
}

# http_ok reports whether GET http://127.0.0.1:PORT/PATH answers 200.
http_ok() {
	local port=$1 path=$2
	if command -v curl >/dev/null 2>&1; then
		curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port$path" 2>/dev/null
		return
	fi
	(
		exec 3<>"/dev/tcp/127.0.0.1/$port"
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$path" "$port" >&3
		read -r -t 2 status <&3
		[[ $status == HTTP/1.?" 200"* ]]
	) 2>/dev/null
}

# as_pg runs a command as the user that owns the PostgreSQL data.
as_pg() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

show_log() {
	local name=$1 file=$2
	if [[ -f $file ]]; then
		printf 'testenv: last lines of the %s log (%s):\n' "$name" "$file" >&2
		tail -n 40 "$file" >&2 || true
	fi
}

# --- services ----------------------------------------------------------------

TMP=""
PG_CA_FILE=""
MINIO_PID=""
PG_DATA=""
CMD_PID=""

start_minio() {
	MINIO_PORT=$(free_port "${PG_PORT:-}")
	local console_port
	console_port=$(free_port "$MINIO_PORT" "${PG_PORT:-}")
	MINIO_USER="dex-$(random_hex 6)"
	MINIO_PASSWORD=$(random_hex 20)
	mkdir -p "$TMP/minio/data"
	MINIO_ROOT_USER=$MINIO_USER MINIO_ROOT_PASSWORD=$MINIO_PASSWORD \
		MINIO_UPDATE=off MINIO_BROWSER=off \
		"$MINIO" server --quiet \
		--address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$console_port" \
		"$TMP/minio/data" >"$TMP/minio/minio.log" 2>&1 </dev/null &
	MINIO_PID=$!
}

wait_minio() {
	local deadline=$((SECONDS + WAIT_SECONDS))
	until http_ok "$MINIO_PORT" /minio/health/ready; do
		if ! kill -0 "$MINIO_PID" 2>/dev/null; then
			show_log MinIO "$TMP/minio/minio.log"
			die "MinIO exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			show_log MinIO "$TMP/minio/minio.log"
			die "MinIO did not become ready on 127.0.0.1:$MINIO_PORT within ${WAIT_SECONDS}s"
		fi
		sleep 0.2
	done
}

stop_minio() {
	[[ -n $MINIO_PID ]] || return 0
	kill -TERM "$MINIO_PID" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$MINIO_PID" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$MINIO_PID" 2>/dev/null || true
	wait "$MINIO_PID" 2>/dev/null || true
	MINIO_PID=""
}

start_postgres() {
	local pgdir="$TMP/pg"
	PG_PORT=$(free_port "${MINIO_PORT:-}")
	PG_PASSWORD=$(random_hex 20)
	mkdir -p "$pgdir"
	chmod 700 "$pgdir"
	if is_root; then
		id postgres >/dev/null 2>&1 || die "user postgres does not exist (it comes with Debian's postgresql package)"
		chown postgres: "$pgdir"
		as_pg test -w "$pgdir" || die "user postgres cannot write $pgdir; set TMPDIR to a directory every user can reach"
	fi
	printf '%s\n' "$PG_PASSWORD" | as_pg tee "$pgdir/pwfile" >/dev/null
	PG_DATA="$pgdir/data"
	if ! as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --pwfile="$pgdir/pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C -N \
		>"$TMP/initdb.log" 2>&1; then
		show_log initdb "$TMP/initdb.log"
		PG_DATA=""
		die "initdb failed"
	fi
	make_pg_certs "$pgdir"
	as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null <<EOF

# Set by scripts/testenv.sh.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$pgdir'
max_connections = 200
ssl = on
ssl_cert_file = '$pgdir/server.crt'
ssl_key_file = '$pgdir/server.key'
EOF
	if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$pgdir/postgres.log" -w -t "$WAIT_SECONDS" start >/dev/null 2>&1; then
		show_log PostgreSQL "$pgdir/postgres.log"
		die "PostgreSQL did not start on 127.0.0.1:$PG_PORT within ${WAIT_SECONDS}s"
	fi
}

# make_pg_certs makes, in DIR, a CA for this run (ca.crt) and the server's
# certificate for 127.0.0.1 and localhost (server.crt, server.key, owned by
# the user that runs PostgreSQL, which refuses a key others can read).
make_pg_certs() {
	local dir=$1
	if ! {
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
			-subj "/CN=dex-testenv CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" &&
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
				-subj "/CN=127.0.0.1" -keyout "$dir/server.key" -out "$dir/server.csr" &&
			printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/server.ext" &&
			openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
				-days 2 -extfile "$dir/server.ext" -out "$dir/server.crt"
	} >"$TMP/openssl.log" 2>&1; then
		show_log openssl "$TMP/openssl.log"
		die "openssl could not make the PostgreSQL test certificates"
	fi
	chmod 600 "$dir/server.key" "$dir/ca.key"
	chmod 644 "$dir/ca.crt" "$dir/server.crt"
	if is_root; then
		chown postgres: "$dir/server.key" "$dir/server.crt"
	fi
	PG_CA_FILE="$dir/ca.crt"
}

wait_postgres() {
	local deadline=$((SECONDS + WAIT_SECONDS))
	local isready="$PG_BIN/pg_isready"
	[[ -x $isready ]] || isready=pg_isready
	until "$isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2; do
		if ((SECONDS >= deadline)); then
			show_log PostgreSQL "$TMP/pg/postgres.log"
			die "PostgreSQL did not accept connections on 127.0.0.1:$PG_PORT within ${WAIT_SECONDS}s"
		fi
		sleep 0.2
	done
}

stop_postgres() {
	[[ -n $PG_DATA && -f $PG_DATA/postmaster.pid ]] || return 0
	if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1; then
		local pid
		pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
		if [[ -n $pid ]]; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	PG_DATA=""
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $CMD_PID ]]; then
		kill -TERM "$CMD_PID" 2>/dev/null || true
		wait "$CMD_PID" 2>/dev/null || true
	fi
	stop_minio || true
	stop_postgres || true
	if [[ -n $TMP ]]; then
		rm -rf "$TMP" || true
	fi
	exit "$rc"
}

run() {
	[[ $# -gt 0 ]] || usage
	install_minio
	install_otelcol
	install_toxiproxy
	ensure_postgres
	ensure_openssl
	ensure_chromium

	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/dex-testenv.XXXXXX")
	# The postgres user must be able to reach its directory inside.
	chmod 755 "$TMP"

	start_postgres
	start_minio
	wait_postgres
	wait_minio
	log "MinIO on 127.0.0.1:$MINIO_PORT, PostgreSQL $(basename "$(dirname "$PG_BIN")") on 127.0.0.1:$PG_PORT"

	export DEX_TEST_S3_ENDPOINT="http://127.0.0.1:$MINIO_PORT"
	export DEX_TEST_S3_BUCKET=dex-test
	export AWS_ACCESS_KEY_ID=$MINIO_USER
	export AWS_SECRET_ACCESS_KEY=$MINIO_PASSWORD
	export AWS_REGION=us-east-1
	export AWS_EC2_METADATA_DISABLED=true
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
	export DEX_TEST_POSTGRES_DSN="postgres://postgres:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	export DEX_TEST_POSTGRES_CA_FILE=$PG_CA_FILE
	export DEX_TEST_OTELCOL=$OTELCOL
	export DEX_TEST_MINIO_BIN=$MINIO
	export DEX_TEST_TOXIPROXY_BIN=$TOXIPROXY
	export DEX_TEST_PG_BIN=$PG_BIN
	export DEX_TEST_CHROMIUM=$CHROMIUM

	# CMD runs in the background so that a signal reaches the trap at once;
	# it keeps this script's standard input.
	local rc=0
	"$@" <&0 &
	CMD_PID=$!
	wait "$CMD_PID" || rc=$?
	CMD_PID=""
	exit "$rc"
}

main() {
	[[ $# -gt 0 ]] || usage
	local verb=$1
	shift
	case $verb in
	install)
		[[ $# -eq 0 ]] || usage
		install_minio
		install_toxiproxy
		log "MinIO $MINIO_VERSION is at $MINIO, toxiproxy $TOXIPROXY_VERSION at $TOXIPROXY"
		install_otelcol
		log "the OpenTelemetry Collector $OTELCOL_VERSION is at $OTELCOL"
		;;
	run)
		[[ ${1:-} == -- ]] && shift
		run "$@"
		;;
	*)
		usage
		;;
	esac
}

main "$@"
