# Routing conformance suite. The two commands that matter:
#   make e2e    run the routing suite (default target: the embedded sim)
#   make test   run the project's own tests (unit tests with -race, the suite on the sim, the interrupt test)
# make help lists every target.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO                  ?= go
E2E_TARGET          ?= sim
E2E_CONFIG          ?= e2e.yaml
ARTIFACTS           ?= $(CURDIR)/artifacts
GINKGO_NODES        ?= 2
# make test runs the sim suite with more processes than cores: its specs
# mostly wait (on routers, probes, held requests), so 4 processes on 2 cores
# took 1 min 23 s where 2 took 2 min 15 s, with the same results.
TEST_GINKGO_NODES   ?= 4
GINKGO_LABEL_FILTER ?=
GINKGO_FOCUS        ?=
GINKGO_SKIP         ?=
GINKGO_TIMEOUT      ?= 2h
GINKGO_ARGS         ?=
FUZZTIME            ?= 10s

# docs/ checks text with regular expressions and runs no goroutines: under
# -race it took 25 s of every run for nothing, so it runs without.
UNIT_PKGS = $$($(GO) list ./... | grep -v -e /suites/ -e '/docs$$')
N                   ?= 20
VERSION             ?=
BASELINE            ?=

APISERVER_TIMEOUT   ?= 20m
# The apiserver tier's pure unit tests (install's checksums and schema facts,
# run comparison, the namespace checks): they need no root and do not link
# k8s.io/kubernetes, so make unit runs them. The emulators the tier runs
# (sim/apiserver: webhooks, pod conversion, node, operator) are in the main
# module and its go test ./....
APISERVER_UNIT_PKGS = ./install/... ./suitecompare/... ./netns/...

# On the sim, vllm-router and sgl-model-gateway run as their binaries built
# from source: make routers first (cached: a second or two when built).
# A run naming another build with E2E_ROUTERS_DIR (the upgrade preview)
# uses it as built: rebuilding the pins there would overwrite the candidate.
SIM_ROUTERS = $(if $(filter sim,$(E2E_TARGET)),$(if $(E2E_ROUTERS_DIR),,routers))

# The suite runner (cmd/e2e): checks the label filter, compiles the suite
# with a visible step, runs Ginkgo with a live traffic line, summarises.
E2E_FLAGS = -go="$(GO)" -target="$(E2E_TARGET)" -config="$(E2E_CONFIG)" -artifacts="$(ARTIFACTS)" \
  -nodes=$(GINKGO_NODES) -label-filter='$(GINKGO_LABEL_FILTER)' -focus='$(GINKGO_FOCUS)' -skip='$(GINKGO_SKIP)' \
  -timeout=$(GINKGO_TIMEOUT) -ginkgo-args='$(GINKGO_ARGS)'

.PHONY: all test unit docs e2e plan qualify repeat reliability test-apiserver routers upstream-llmd test-upstream-llmd bench bench-dist fuzz lint report-check clean help e2e-runner

all: lint test ## gofmt and go vet, then make test

help: ## list every target
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

test: routers unit ## the routers built (cached), unit tests with -race, then the suite on the sim, the interrupt test, and the llm-d differential where llm-d's EPP can be built (else one line saying why not)
	$(MAKE) e2e E2E_TARGET=sim GINKGO_NODES=$(TEST_GINKGO_NODES)
	$(MAKE) reliability
	@bash hack/test-upstream-llmd.sh --if-available

unit: ## unit tests of every package, with -race (docs/ without: text checks only); of the suites their plain Go tests (registry, rows, plan, generated docs, waits), not the specs
	@echo "unit: compiling and running the unit tests with -race; the first run compiles for a few minutes, then a line per package"
	@bash hack/heartbeat.sh "unit tests" $(GO) test -race -count=1 -timeout 10m $(UNIT_PKGS)
	@$(GO) test -count=1 ./docs
	@echo "unit: the suites' plain Go tests (registry, rows, plan, generated docs, waits), not the specs"
	@bash hack/heartbeat.sh "suite checks" $(GO) test -race -count=1 -timeout 5m -skip '^TestRouting$$' ./suites/...
	@echo "unit: the apiserver tier's unit tests (test/apiserver, its own module; no root needed)"
	@cd test/apiserver && bash ../../hack/heartbeat.sh "apiserver unit tests" $(GO) test -race -count=1 -timeout 5m $(APISERVER_UNIT_PKGS)

docs: ## write README.md's claims and deployment tables and e2e.yaml's claim list from the claim registry (make unit checks them)
	$(GO) test -count=1 -run '^TestGeneratedDocsAreCurrent$$' ./suites/routing -args -update-docs

e2e-runner: ## build bin/e2e, the suite runner that e2e, qualify and repeat use
	@echo "e2e: compiling the suite runner (cmd/e2e)"
	@$(GO) build -o bin/e2e ./cmd/e2e

e2e: $(SIM_ROUTERS) e2e-runner ## run the routing suite on E2E_TARGET (sim, kube, kind); prints a summary and where the report is
	@bin/e2e run $(E2E_FLAGS)

plan: e2e-runner ## what make e2e with the same knobs would create and cost on a GPU cluster (cost model in e2e.yaml), creating nothing; on kube checked against the free accelerators
	@bin/e2e plan $(E2E_FLAGS)

qualify: $(SIM_ROUTERS) e2e-runner ## the documented and extended claims, bundled: make qualify VERSION=v0.9.0 [BASELINE=artifacts/qualification-v0.8.0.tar.gz]
	@if [ -z "$(VERSION)" ]; then echo "qualify: set VERSION to the operator version qualified, e.g. make qualify VERSION=v0.9.0"; exit 2; fi
	@bin/e2e qualify $(E2E_FLAGS) -version='$(VERSION)' -baseline='$(BASELINE)'

repeat: $(SIM_ROUTERS) e2e-runner ## run the suite N times (N=20) and name the flaky specs: "runs: 20, flaky specs: 0"
	@bin/e2e repeat $(E2E_FLAGS) -n=$(N)

reliability: ## on the sim: Ctrl-C mid-traffic ends within 30 s with a partial report and nothing left running; an operator whose router edits replace engines trips the edit guard
	@echo "reliability: interrupting make e2e during traffic; the edit guard against an operator that replaces engines on a router edit"
	E2E_RELIABILITY=1 $(GO) test -count=1 -timeout 15m -run '^(TestInterrupt|TestEditGuard)' -v ./cmd/e2e

test-apiserver: routers ## the kube target against a real kube-apiserver, in a private network namespace (root; test/apiserver/README.md); under CI=true a machine that cannot run it fails
	@cd test/apiserver && missing=$$($(GO) run ./netns/cmd/missing) && \
	  if [ -n "$$missing" ]; then echo "test-apiserver: skipped: $$missing"; exit 0; fi && \
	  $(GO) test -count=1 -timeout $(APISERVER_TIMEOUT) ./...

routers: ## build vllm-router and sgl-model-gateway from their pinned sources with cargo, cached outside the checkout (~/.cache/routing-conformance/routers); ROUTER_PATCHES=<dir> applies the operator's patches; VLLM_ROUTER_VERSION= / SGLANG_ROUTER_VERSION= build others
	@bash hack/routers.sh

upstream-llmd: ## build llm-d-router v0.10.0's EPP (cmd/epp) into .upstream-llmd/ with a manifest.json: go install where the module proxy serves it, else from LLMD_ROUTER_SRC (a v0.10.0 checkout) and LLMD_KV_CACHE_SRC; make test uses it when it can
	@bash hack/upstream-llmd.sh

test-upstream-llmd: routers ## every llm-d claim on the emulated EPP and on llm-d-router v0.10.0's built EPP (make upstream-llmd first, or it builds it), compared row by row; artifacts/upstream-llmd/differential.md
	@bash hack/test-upstream-llmd.sh

bench: ## benchmarks printing ratios against a peer measured in the same run; the driver's overhead per concurrency
	bash bench/run.sh

bench-dist: ## bin/bench.tar.gz: the driver benches as binaries and scripts, to run on another machine without Go (see bench/overhead.sh)
	@rm -rf bin/bench-dist && mkdir -p bin/bench-dist/bench
	$(GO) build -o bin/bench-dist/bench/ ./bench/cmd/pacedserver ./bench/cmd/overheadbench ./bench/cmd/driverbench ./bench/cmd/loopback-openai
	cd bin/bench-dist && GOBIN="$$PWD/bench" $(GO) install github.com/rakyll/hey@v0.1.5
	cp bench/overhead.sh bench/driver-vs-peer.sh bin/bench-dist/bench/
	tar -czf bin/bench.tar.gz -C bin/bench-dist bench
	@echo "bench-dist: bin/bench.tar.gz; on the other machine: tar xzf bench.tar.gz && bash bench/overhead.sh && bash bench/driver-vs-peer.sh"

fuzz: ## short runs of every fuzz target
	bash hack/fuzz.sh $(FUZZTIME)

lint: ## gofmt, go vet, and the import boundaries (hack/boundary: sim/ imports only api/ and sim/; only clusters/sim, cmd/routing-sim, docs/ and the API-server tier import sim/; clusters/ imports no assertions/, suites/ or report/; internal's helpers import nothing of the project; each layer of docs/architecture.md imports only the layers below it)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run ./hack/boundary

report-check: ## render the last qualification.html in headless chromium; check the headline, matrix and charts drew
	bash report/check-render.sh "$(ARTIFACTS)/qualification.html"

clean: ## remove artifacts/ and bin/
	rm -rf "$(ARTIFACTS)" bin
