#!/usr/bin/env bash
# Measures ordinary flows beside flows carrying large inputs (issue 11), as
# the README's "Large inputs beside ordinary flows" tables do: for each
# round, a fresh `dex-server-zd dev --durability processCrashSafe` on a
# temporary data directory, then `dexcli bench chain` without and with 1 %
# of flows carrying a 4 MiB payload, closed loop (32 callers) and open loop
# (100 flows/s for 40 s). Prints one JSON report per run to stdout.
#
#   scripts/bench-large.sh                 # 2 rounds, binaries built into bin/
#   ROUNDS=1 BINDIR=/tmp/old scripts/bench-large.sh   # binaries of another commit
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-2}
bindir=${BINDIR:-bin}
if [[ -z "${BINDIR:-}" ]]; then
	go build -o bin/ ./cmd/dex-server-zd ./cmd/dexcli
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # label, bench flags...
	local label=$1; shift
	local data port mport pid
	data=$(mktemp -d)
	port=$(free_port)
	mport=$(free_port)
	"$bindir/dex-server-zd" dev --data-dir "$data" --listen "127.0.0.1:$port" \
		--metrics-listen "127.0.0.1:$mport" --durability processCrashSafe 2>"$data.log" &
	pid=$!
	for _ in $(seq 1 100); do
		"$bindir/dexcli" --server "127.0.0.1:$port" --timeout 1s admin describe >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "{\"run\": \"$label\", \"report\":"
	"$bindir/dexcli" --server "127.0.0.1:$port" --timeout 10m -o json bench chain \
		--server-pid "$pid" --metrics-url "http://127.0.0.1:$mport/metrics" "$@" || echo null
	echo "}"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$data" "$data.log"
}

for r in $(seq 1 "$rounds"); do
	run "closed, without, round $r" --flows 20000 --callers 32
	run "closed, 1 % large, round $r" --flows 5000 --callers 32 --large-fraction 0.01
	run "open 100/s, without, round $r" --rate 100 --duration 40s
	run "open 100/s, 1 % large, round $r" --rate 100 --duration 40s --large-fraction 0.01
done
