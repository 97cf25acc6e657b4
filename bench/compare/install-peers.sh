#!/usr/bin/env bash
# install-peers.sh installs the pinned peers into bench/compare/.tools
# (git-ignored): the Restate server from npm and the Temporal CLI with
# go install. DBOS and the SDKs are Go modules pinned in go.mod. Each is
# skipped when the pinned version is already there.
set -euo pipefail

readonly RESTATE_SERVER_VERSION=1.7.12
readonly TEMPORAL_CLI_VERSION=v1.5.1

DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly TOOLS="$DIR/.tools"
mkdir -p "$TOOLS/bin"

log() { printf 'install-peers: %s\n' "$*" >&2; }

if [[ ! -f $TOOLS/restate.version || $(<"$TOOLS/restate.version") != "$RESTATE_SERVER_VERSION" ]]; then
	log "installing @restatedev/restate-server@$RESTATE_SERVER_VERSION with npm"
	[[ -f $TOOLS/package.json ]] || echo '{"name":"dexzd-bench-compare-tools","private":true}' >"$TOOLS/package.json"
	(cd "$TOOLS" && npm install --no-audit --no-fund --save-exact "@restatedev/restate-server@$RESTATE_SERVER_VERSION" >&2)
	echo "$RESTATE_SERVER_VERSION" >"$TOOLS/restate.version"
fi

if [[ ! -x $TOOLS/bin/temporal || ! -f $TOOLS/temporal.version || $(<"$TOOLS/temporal.version") != "$TEMPORAL_CLI_VERSION" ]]; then
	log "installing github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION (several minutes the first time)"
	# Outside the repo, so that its go.mod plays no part.
	(cd / && GOBIN="$TOOLS/bin" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION")
	echo "$TEMPORAL_CLI_VERSION" >"$TOOLS/temporal.version"
fi
