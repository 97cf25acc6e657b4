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

# shellcheck source=lib/bench-server.sh
. scripts/lib/bench-server.sh

for r in $(seq 1 "$rounds"); do
	run "closed, without, round $r" --flows 20000 --callers 32
	run "closed, 1 % large, round $r" --flows 5000 --callers 32 --large-fraction 0.01
	run "open 100/s, without, round $r" --rate 100 --duration 40s
	run "open 100/s, 1 % large, round $r" --rate 100 --duration 40s --large-fraction 0.01
done
