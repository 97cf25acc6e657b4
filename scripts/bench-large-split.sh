#!/usr/bin/env bash
# Separates what large inputs cost ordinary flows in the server from what
# they cost on the machine (issue 11). Open loop, per round, each on fresh
# `dex-server-zd dev --durability ${DURABILITY:-processCrashSafe}` servers:
#
#   without          one driver, 99 ordinary flows/s
#   one driver       one driver, 100 flows/s, 1 % of them with 4 MiB inputs
#                    (its worker decodes and encodes the large values too)
#   same server      99 ordinary flows/s from one driver and 1 large flow/s
#                    from a second (its own flow type and worker), one server
#   other server     the same two drivers, each against a server of its own
#
# "same server" against "other server" is what sharing the server costs the
# ordinary flows; "other server" against "without" is what the large flows'
# CPU costs them on this machine whoever serves them. Prints one JSON
# report per driver run ({"run": LABEL, "report": ...}).
#
#   scripts/bench-large-split.sh            # 2 rounds of 30 s, binaries built into bin/
#   ROUNDS=1 DURATION=20s BINDIR=/tmp/old scripts/bench-large-split.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
duration=${DURATION:-30s}
bindir=${BINDIR:-bin}
if [[ -z "${BINDIR:-}" ]]; then
	go build -o bin/ ./cmd/dex-server-zd ./cmd/dexcli
fi
# shellcheck source=lib/bench-server.sh
. scripts/lib/bench-server.sh

servers=()
start_server() { # sets $addr, $spid
	local data port
	data=$(mktemp -d)
	port=$(free_port)
	"$bindir/dex-server-zd" dev --data-dir "$data" --listen "127.0.0.1:$port" \
		--durability "${DURABILITY:-processCrashSafe}" 2>"$data.log" &
	spid=$!
	servers+=("$spid:$data")
	addr=127.0.0.1:$port
	for _ in $(seq 1 100); do
		"$bindir/dexcli" --server "$addr" --timeout 1s admin describe >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "server at $addr did not answer" >&2
	return 1
}
stop_servers() {
	local s
	for s in "${servers[@]}"; do
		kill -TERM "${s%%:*}" 2>/dev/null || true
		wait "${s%%:*}" 2>/dev/null || true
		rm -rf "${s#*:}" "${s#*:}.log"
	done
	servers=()
}
trap stop_servers EXIT
bench() { # label, address, server pid, flags...: one driver's JSON report to $tmp/LABEL.json
	local label=$1 a=$2 p=$3
	shift 3
	"$bindir/dexcli" --server "$a" --timeout 10m -o json bench chain --server-pid "$p" "$@" >"$tmp/$label.json" || echo null >"$tmp/$label.json"
}
emit() { # label, file
	echo "{\"run\": \"$1\", \"report\":"
	cat "$2"
	echo "}"
}
tmp=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
	start_server
	bench without "$addr" "$spid" --rate 99 --duration "$duration"
	emit "without, round $r" "$tmp/without.json"
	stop_servers

	start_server
	bench one "$addr" "$spid" --rate 100 --duration "$duration" --large-fraction 0.01
	emit "one driver, round $r" "$tmp/one.json"
	stop_servers

	start_server
	bench same-ordinary "$addr" "$spid" --rate 99 --duration "$duration" &
	o=$!
	bench same-large "$addr" "$spid" --rate 1 --duration "$duration" --large-fraction 1 --flow-type bench-chain-large &
	wait "$o" $!
	emit "same server, ordinary, round $r" "$tmp/same-ordinary.json"
	emit "same server, large, round $r" "$tmp/same-large.json"
	stop_servers

	start_server
	a1=$addr p1=$spid
	start_server
	bench other-ordinary "$a1" "$p1" --rate 99 --duration "$duration" &
	o=$!
	bench other-large "$addr" "$spid" --rate 1 --duration "$duration" --large-fraction 1 --flow-type bench-chain-large &
	wait "$o" $!
	emit "other server, ordinary, round $r" "$tmp/other-ordinary.json"
	emit "other server, large, round $r" "$tmp/other-large.json"
	stop_servers
done
rm -rf "$tmp"
