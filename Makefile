# Dex-ZD. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
GOLANGCI_LINT_VERSION := v2.15.0
PKGS := ./...
# Integration tests must not skip when run through `make test`.
export DEX_TEST_REQUIRE ?= s3,postgres,otelcol,chromium

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-18s %s\n", $$1, $$2}'

.PHONY: dev
dev: ## Start dex-server-zd dev (data in ./.dex-data, API on 127.0.0.1:8801, web UI on http://127.0.0.1:8802/) with the example worker; Ctrl-C stops both.
	scripts/dev.sh

.PHONY: build
build: ## Build every package and command.
	$(GO) build $(PKGS)

.PHONY: test
test: ## Run the whole suite: vet, unit and integration tests against real MinIO and PostgreSQL (started and stopped here), the web UI in chromium.
	$(GO) vet $(PKGS)
	scripts/testenv.sh run -- $(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -timeout 20m -run 'TestSim$$' ./internal/sim
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: test-unit
test-unit: ## Run the tests that need no services (integration tests skip).
	DEX_TEST_REQUIRE= $(GO) test -race -count=1 $(PKGS)

.PHONY: test-integration
test-integration: ## Run only the store conformance and integration tests against real MinIO and PostgreSQL.
	scripts/testenv.sh run -- $(GO) test -count=1 ./internal/blob/... ./internal/testenv/...

.PHONY: sim
sim: ## Run the node simulator (internal/sim): SEEDS=N seeds from FIRST (default 1000 from 0), or replay SEED=N (REPEAT=K times).
	$(GO) test -count=1 -v -timeout 0 -run 'TestSim$$' ./internal/sim \
		$(if $(SEED),-seed $(SEED) -repeat $(or $(REPEAT),1),-seeds $(or $(SEEDS),1000) -first $(or $(FIRST),0))

CHAOS_FLAGS ?= -chaos.cycles=40 -chaos.storecycles=3 -chaos.phase=10s
.PHONY: chaos
chaos: ## Run the chaos tests long (test/chaos: 240 SIGKILL/SIGSTOP cycles, store faults, full disk; CHAOS_FLAGS to change); prints the table.
	scripts/testenv.sh run -- $(GO) test -count=1 -v -timeout 0 -parallel 3 -run 'TestChaos$$' ./test/chaos $(CHAOS_FLAGS)

.PHONY: fuzz
fuzz: ## Fuzz the batch, envelope and AES-GCM value decoders for FUZZTIME each (default 60s).
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $${FUZZTIME:-60s} ./internal/wal
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEnvelope$$' -fuzztime $${FUZZTIME:-60s} ./internal/serving
	$(GO) test -run '^$$' -fuzz '^FuzzAESGCMDecode$$' -fuzztime $${FUZZTIME:-60s} ./dex

.PHONY: bench
bench: ## Run the log append benchmarks on every backend (MinIO and PostgreSQL started here).
	scripts/testenv.sh run -- $(GO) test -run '^$$' -bench BenchmarkAppend -benchtime $${BENCHTIME:-2s} ./internal/wal

BENCH_COMPARE_FLAGS ?= --flows 2000 --callers 32 --rounds 3 --engine-flows temporal=300
.PHONY: bench-compare
bench-compare: ## Run the chain workload on Dex-ZD, DBOS, Restate and Temporal (pinned peers installed into bench/compare/.tools; BENCH_COMPARE_FLAGS to change).
	cd bench/compare && ./install-peers.sh && $(GO) vet ./... && $(GO) build -o .tools/compare . && ../../scripts/testenv.sh run -- .tools/compare --json results/latest.json $(BENCH_COMPARE_FLAGS)

.PHONY: lint
lint: $(TOOLS)/golangci-lint ## Run golangci-lint with .golangci.yml.
	$(TOOLS)/golangci-lint run $(PKGS)

$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: generate
generate: ## Regenerate generated code (none yet: the API contract arrives with the engine).
	$(GO) generate $(PKGS)

.PHONY: verify
verify: generate ## Fail when generated code, formatting or go.mod are out of date.
	$(GO) mod tidy
	gofmt -l . | (! grep .) || (echo "gofmt needed on the files above" && exit 1)
	git diff --exit-code -- go.mod go.sum
	git diff --exit-code

.PHONY: tools
tools: $(TOOLS)/golangci-lint ## Install the pinned tools (golangci-lint, MinIO, toxiproxy, the test OpenTelemetry Collector) into .tools/bin.
	scripts/testenv.sh install
