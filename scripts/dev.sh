#!/usr/bin/env bash
# Starts `dex-server-zd dev` and the example worker together; Ctrl-C stops
# both (the server drains, releases its lease and exits 0).
#
#   scripts/dev.sh            # data in ./.dex-data, API on 127.0.0.1:8801, UI on 127.0.0.1:8802
#   DEX_DATA_DIR=/tmp/d DEX_LISTEN=127.0.0.1:9901 DEX_METRICS_LISTEN=127.0.0.1:9902 DEX_WEB_LISTEN=127.0.0.1:9903 scripts/dev.sh
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DEX_DATA_DIR:-.dex-data}
listen=${DEX_LISTEN:-127.0.0.1:8801}
metrics=${DEX_METRICS_LISTEN:-127.0.0.1:9464}
web=${DEX_WEB_LISTEN:-127.0.0.1:8802}
durability=${DEX_DURABILITY:-strict}

echo "dev: building bin/dex-server-zd, bin/dexcli and bin/example-worker" >&2
go build -o bin/ ./cmd/dex-server-zd ./cmd/dexcli
go build -o bin/example-worker ./examples/worker

# A second `make dev` must not start a second example worker against the
# first server: refuse at once, naming who holds the data directory.
if bin/dexcli --server "$listen" --timeout 1s admin describe >/dev/null 2>&1; then
	holder=""
	if [[ -s "$data/dev.lock" ]]; then holder=" (process $(head -c 20 "$data/dev.lock" | tr -d '\n') holds $data/dev.lock)"; fi
	echo "dev: a server already answers on $listen$holder; stop it (Ctrl-C in its terminal) or set DEX_LISTEN and DEX_DATA_DIR" >&2
	exit 1
fi

pids=()
stop() {
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	wait || true
}
trap stop EXIT INT TERM

bin/dex-server-zd dev --data-dir "$data" --listen "$listen" --durability "$durability" --metrics-listen "$metrics" --web-listen "$web" &
pids+=($!)

# Wait until the server answers before the worker connects.
for _ in $(seq 1 150); do
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		echo "dev: dex-server-zd exited; see its log above" >&2
		exit 1
	fi
	if bin/dexcli --server "$listen" --timeout 1s admin describe >/dev/null 2>&1; then
		break
	fi
	sleep 0.2
done

bin/example-worker --server "$listen" &
pids+=($!)

cat >&2 <<TXT

dev: the server listens on $listen with data in $data; the example worker serves
     the order, approval and counter flows. The web UI: http://$web/
     Metrics and probes:
     http://$metrics/metrics  http://$metrics/readyz  http://$metrics/livez
     In another terminal:

  bin/dexcli flow start order order-42 --step Reserve --input '{"id":"42","cents":1200,"card":"visa"}'
  bin/dexcli flow state order-42
  bin/dexcli flow wait order-42

Ctrl-C stops both.
TXT
wait -n "${pids[@]}"
