#!/usr/bin/env bash
# Compares two builds with `dexcli bench chain`, alternating them round by
# round so that a machine's drift affects both alike: for each round, a
# fresh dev server of build A, then of build B, each loaded with the same
# flags. Prints one JSON report per run ({"run": "A round 1", "report": ...}).
#
#   git worktree add /tmp/old OLDCOMMIT && (cd /tmp/old && go build -o /tmp/old/bin/ ./cmd/...)
#   scripts/bench-ab.sh /tmp/old/bin bin --flows 2000 --callers 32
#   ROUNDS=5 DURABILITY=strict scripts/bench-ab.sh A_BINDIR B_BINDIR FLAGS...
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
	echo "usage: scripts/bench-ab.sh A_BINDIR B_BINDIR [dexcli bench chain flags...]" >&2
	exit 2
fi
a=$1 b=$2
shift 2
rounds=${ROUNDS:-3}
# shellcheck source=lib/bench-server.sh
. scripts/lib/bench-server.sh
for r in $(seq 1 "$rounds"); do
	bindir=$a run "A round $r" "$@"
	bindir=$b run "B round $r" "$@"
done
