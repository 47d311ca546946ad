# Routing conformance suite. The two commands that matter:
#   make e2e    run the routing suite (default target: the embedded sim)
#   make test   run the project's own tests (unit tests with -race, then the suite on the sim)
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO                  ?= go
E2E_TARGET          ?= sim
E2E_CONFIG          ?= e2e.yaml
ARTIFACTS           ?= $(CURDIR)/artifacts
GINKGO_NODES        ?= 2
GINKGO_LABEL_FILTER ?=
GINKGO_FOCUS        ?=
GINKGO_SKIP         ?=
GINKGO_TIMEOUT      ?= 2h
GINKGO_ARGS         ?=
FUZZTIME            ?= 10s

GINKGO := $(GO) tool ginkgo
UNIT_PKGS = $$($(GO) list ./... | grep -v /suites/)

APISERVER_TIMEOUT   ?= 20m

.PHONY: all test unit e2e test-apiserver bench fuzz lint report-check clean help

all: lint test

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

test: unit ## unit tests with -race, then the suite on the sim target
	$(MAKE) e2e E2E_TARGET=sim

unit: ## unit tests of every package, with -race; of the suites their plain Go tests (registry, waits), not the specs
	$(GO) test -race -count=1 -timeout 10m $(UNIT_PKGS)
	$(GO) test -race -count=1 -timeout 5m -skip '^TestRouting$$' ./suites/...

e2e: ## run the routing suite on E2E_TARGET (sim, kube, kind)
	@mkdir -p "$(ARTIFACTS)"
	E2E_TARGET=$(E2E_TARGET) ARTIFACTS="$(ARTIFACTS)" $(GINKGO) -v --procs=$(GINKGO_NODES) \
	  --timeout=$(GINKGO_TIMEOUT) --fail-on-pending --fail-on-empty --keep-going \
	  --poll-progress-after=5m --poll-progress-interval=1m \
	  $(if $(GINKGO_LABEL_FILTER),--label-filter='$(GINKGO_LABEL_FILTER)') \
	  $(if $(GINKGO_FOCUS),--focus='$(GINKGO_FOCUS)') \
	  $(if $(GINKGO_SKIP),--skip='$(GINKGO_SKIP)') \
	  --output-dir="$(ARTIFACTS)" --json-report=ginkgo-report.json \
	  $(GINKGO_ARGS) ./suites/routing -- -e2e.config="$(CURDIR)/$(E2E_CONFIG)" -e2e.artifacts="$(ARTIFACTS)" \
	  || { rc=$$?; echo "report: $(ARTIFACTS)/qualification.html"; exit $$rc; }
	@echo "report: $(ARTIFACTS)/qualification.html (also qualification.md, report.json, junit.xml)"

test-apiserver: ## the kube target against a real kube-apiserver, in a private network namespace (root; test/apiserver/README.md)
	@cd test/apiserver && missing=$$($(GO) run ./netns/cmd/missing) && \
	  if [ -n "$$missing" ]; then echo "test-apiserver: skipped: $$missing"; exit 0; fi && \
	  $(GO) test -count=1 -timeout $(APISERVER_TIMEOUT) ./...

bench: ## benchmarks printing ratios against a peer measured in the same run
	bash bench/run.sh

fuzz: ## short runs of every fuzz target
	bash hack/fuzz.sh $(FUZZTIME)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

report-check: ## render the last qualification.html in headless chromium and check the charts drew
	bash report/check-render.sh "$(ARTIFACTS)/qualification.html"

clean:
	rm -rf "$(ARTIFACTS)" bin
