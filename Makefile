# Concord — the two commands you need: `make demo` and `make test`.
# Every target that needs Kafka or PostgreSQL runs infra/local/up first (idempotent,
# seconds when the stack already runs) and reads the addresses it wrote to
# .local/stack.env. An already-set CONCORD_KAFKA_BROKERS / CONCORD_POSTGRES_URL wins.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
MODULES := infra schemas relay consumers services examples
PKGS := $(foreach m,$(MODULES),./$(m)/...)
GOTEST_FLAGS ?= -race -count=1 -timeout 18m
# The fuzz tests, differential and property, package:Target (go test -fuzz
# takes one target per run). FUZZ_PARALLEL is the number of fuzzing workers.
FUZZ_TARGETS := \
	./schemas:FuzzParseFastDecodesAsEncodingJSON \
	./schemas:FuzzFastPathAcceptsOnlyWhatJSONSchemaAccepts \
	./schemas/contract:FuzzDecodeAgreesWithEncodingJSON \
	./consumers/idempotent:FuzzDecodeEnvelopeFastDecodesAsEncodingJSON \
	./services/order:FuzzOrderRequestThatValidatesIsStorable \
	./schemas/compat:FuzzDiffJSONSchemaSelfAndDeterminism \
	./schemas/compat:FuzzDiffAvroSelfAndDeterminism \
	./services/payment/paymentprovider:FuzzVerifyAcceptsOnlyAFreshValidSignature \
	./services/payment/paymentprovider:FuzzEventFromBodyErrsInsteadOfPanicking
FUZZ_TIME ?= 2m
FUZZ_PARALLEL ?= 1
BIN := $(CURDIR)/bin
# --version and concord_build_info of every binary: the nearest tag (or the
# commit), the commit and the build time. Go stamps the commit by itself;
# these make a release build say its version too.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_TIME ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
KIT := github.com/concordhq/concord/infra/kit
LDFLAGS := -X $(KIT).version=$(VERSION) -X $(KIT).revision=$(REVISION) -X $(KIT).buildTime=$(BUILD_TIME)
# Loads the stack's addresses into the recipe's environment.
STACK := set -a; . $(CURDIR)/.local/stack.env; set +a;

.PHONY: help build up down status test chaos test-unit lint generate fuzz fuzz-short demo console bench bench-relay bench-consumer bench-saga bench-reconciler clean-local schema-check mutate

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

build: ## build every binary into ./bin
	@mkdir -p $(BIN)
	@for m in $(MODULES); do \
	  (cd $$m && for d in $$(find . -path '*/cmd/*' -name main.go -exec dirname {} \; | sort); do \
	    go build -ldflags "$(LDFLAGS)" -o $(BIN)/$$(basename $$d) $$d || exit 1; done) || exit 1; \
	done
	@ls $(BIN)

up: ## start the local stack (PostgreSQL + Kafka) and print its addresses
	@infra/local/up

down: ## stop the local stack (data kept under .local/)
	@infra/local/down

status: ## say whether the local stack runs
	@infra/local/status

lint: ## gofmt, go vet, and the generated event contract is fresh
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(PKGS)
	cd schemas/contract && go run ../internal/contractgen -check -out contract_gen.go

generate: ## regenerate schemas/contract from schemas/events
	go generate ./schemas/...

test: lint schema-check fuzz-short up ## lint, schema review, short fuzz, start the stack, run every test with -race
	$(STACK) go test $(GOTEST_FLAGS) $(PKGS)

# The whole pipeline, two instances of every service, under SIGKILL,
# SIGSTOP and restarts of a private PostgreSQL and Kafka broker; `make test`
# runs its short form. CHAOS_SEED picks the schedule, CHAOS_LOAD its length.
CHAOS_SEED ?= 1
CHAOS_LOAD ?= 4m
chaos: up ## fault run: kill -9, pauses, database and broker restarts under load; prints its report, fails on any broken promise
	$(STACK) CONCORD_CHAOS=full CONCORD_CHAOS_SEED=$(CHAOS_SEED) CONCORD_CHAOS_LOAD=$(CHAOS_LOAD) \
	  go test -count=1 -v -timeout 30m -run '^TestChaos$$' ./services/internal/chaostest/

# A failing input is written to the package's testdata/fuzz/<Target>/; keep
# it there with the fix, and the test runs it from then on. Go 1.26's fuzz
# coordinator can report its own -fuzztime deadline as a failure, "context
# deadline exceeded" with no failing input (go.dev/issue/75804, fixed in Go
# 1.27); such a run counts as passed.
fuzz: ## run each fuzz target for FUZZ_TIME (2m) with FUZZ_PARALLEL (1) workers
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz $$name in $$pkg for $(FUZZ_TIME)"; \
	  if go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) -parallel $(FUZZ_PARALLEL) $$pkg 2>&1 | tee $$log; then continue; fi; \
	  if grep -qx '    context deadline exceeded' $$log && ! grep -q 'Failing input written\|failure while testing seed corpus' $$log; then \
	    echo "$$name: the deadline reported as a failure, no failing input (go.dev/issue/75804): passed"; continue; fi; \
	  exit 1; \
	done

fuzz-short: ## each fuzz target for 12s, as part of make test
	@$(MAKE) --no-print-directory fuzz FUZZ_TIME=12s

test-unit: ## tests that need no stack (fails fast where one is needed)
	go test -count=1 ./schemas/...

# Mutation testing of the pure decision packages (mutate/mutate.sh lists
# them). Not part of `make test`: it needs no stack but takes minutes.
# gremlins is installed at a pinned version into ./bin/tools.
GREMLINS_VERSION := v0.6.0
GREMLINS := $(BIN)/tools/gremlins-$(GREMLINS_VERSION)
MUTATE_WORKERS ?= 2

$(GREMLINS):
	@mkdir -p $(BIN)/tools
	GOBIN=$(BIN)/tools go install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	mv $(BIN)/tools/gremlins $@

mutate: $(GREMLINS) ## mutation testing of the decision packages: >= 90% of covered mutants killed, the rest listed in mutate/equivalent.txt
	GREMLINS=$(GREMLINS) WORKERS=$(MUTATE_WORKERS) mutate/mutate.sh

# The base of the schema review: the merge base with origin/main on a branch,
# else the previous commit. Empty on a single-commit or depth-1 clone, where
# the check compares nothing and says so.
SCHEMA_BASE ?= $(shell b=$$(git merge-base HEAD origin/main 2>/dev/null || true); \
	if [ -n "$$b" ] && [ "$$b" != "$$(git rev-parse HEAD)" ]; then echo $$b; \
	else git rev-parse -q --verify HEAD~1 2>/dev/null; fi)

schema-check: ## schema lint and compatibility review against the merge base / previous commit
	cd schemas && go run ./cmd/schemactl lint
	cd schemas && go run ./cmd/schemactl check --base "$(SCHEMA_BASE)"

demo: up build ## the main job: run the saga with provider faults and the broker rail with broker faults, reconcile and heal, check the invariants
	$(STACK) $(BIN)/demo

# The console over the local stack's databases (what the last `make demo`
# left). CONSOLE_FLAGS adds flags: --users-file, --http-addr, …; without a
# users file an operator "admin" with a fresh password is printed at start.
CONSOLE_FLAGS ?= --generate-admin
console: up build ## serve the operations console over the demo's data and print its URL
	$(STACK) $(BIN)/console --database-url "$$CONCORD_CONSOLE_DATABASE_URL" $(CONSOLE_FLAGS)

# Each run prints both checkout flows side by side (--orchestrated-share
# splits the offered rate between them), then the choreographed flow alone
# at the higher rate.
bench-saga: up build ## saga throughput and order-to-terminal latency per flow (choreographed beside orchestrated), no faults
	$(STACK) $(BIN)/demo --bench --orders 2000 --rate 100 --orchestrated-share 0.5
	$(STACK) $(BIN)/demo --bench --orders 6000 --rate 400 --concurrency 64 --orchestrated-share 0.5
	$(STACK) $(BIN)/demo --bench --orders 6000 --rate 400 --concurrency 64 --orchestrated-share 0

bench-reconciler: up ## reconciler: full cycle over 100k payments at the provider's 25 req/s, per-row vs list-based
	$(STACK) go test -run '^$$' -bench BenchmarkReconcilerCycle -benchtime 1x -timeout 30m ./services/reconciler/reconcilerstore/

bench: bench-relay bench-consumer bench-saga bench-reconciler ## all benchmarks, each printing its same-run baseline

# The Watermill peer is a module of its own (relay/peers/watermill), outside
# the workspace, so Watermill and Sarama never enter Concord's build. The
# Debezium peer runs inside relay-bench (--peers) on a Kafka Connect JVM
# whose jars relay/peers/debezium/fetch resolves with Maven into .local/cache.
bench-relay: up ## outbox relay: events/s (untraced and traced), commit-to-ack p50/p99 at 2,000/s, same-run Kafka and DB ceilings, Debezium's and Watermill's outboxes beside it
	$(STACK) cd relay && go run ./cmd/relay-bench
	$(STACK) cd relay/peers/watermill && GOWORK=off go run .

bench-consumer: up ## consumer throughput: 200k 1 KiB events over 12 partitions (untraced and traced), beside the raw batched-INSERT rate
	$(STACK) cd consumers && go test -run '^$$' -bench BenchmarkConsumerThroughput -benchtime 1x -timeout 30m ./idempotent/

clean-local: ## stop the stack and delete .local/ (all local data)
	@infra/local/down --purge
