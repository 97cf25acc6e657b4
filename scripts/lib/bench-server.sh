# Sourced by the bench scripts: run LABEL FLAGS... starts a fresh
# `dex-server-zd dev --durability ${DURABILITY:-processCrashSafe}` from $bindir on a
# temporary data directory, runs `dexcli bench chain FLAGS...` against it
# with the server's CPU and metrics, and prints {"run": LABEL, "report": ...}.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # label, bench flags...
	local label=$1; shift
	local data port mport pid
	data=$(mktemp -d)
	port=$(free_port)
	mport=$(free_port)
	"$bindir/dex-server-zd" dev --data-dir "$data" --listen "127.0.0.1:$port" \
		--metrics-listen "127.0.0.1:$mport" --durability "${DURABILITY:-processCrashSafe}" 2>"$data.log" &
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
