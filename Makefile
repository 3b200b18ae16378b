# taskd: common tasks. `make` alone lists them.
#
# Overrides: make test TESTFLAGS='-run TestObtain -v' PKG=./locker/...
#            make bench BENCH=Claim BENCHFLAGS='-benchtime=5s'
#            make bench BENCHARGS=-quick   (taskd-bench's flags: a short smoke run)
#            make bench RIVERARGS='-rounds 1'   (the River comparison's flags; -quick follows BENCHARGS)
#            make chaos CHAOSFLAGS='-editors 50 -dir /tmp/chaos'

GO         ?= go
GOFMT      ?= gofmt
PKG        ?= ./...
TESTFLAGS  ?=
BENCH      ?= .
BENCHFLAGS ?=
BENCHARGS  ?=
RIVERARGS  ?= $(filter -quick,$(BENCHARGS))
CHAOSFLAGS ?=
# `make run` gets its own servers, so it can run beside `make test` (16300): only the
# ones `taskd dev` uses (scripts/services.sh's profile demo), not the test set.
RUN_PORT_BASE ?= 26300
# Where `make run` and `make observe` serve taskd (host:port). Empty: config.yaml's
# http.addr for make run; 127.0.0.1:8080, which its Prometheus scrapes, for make observe.
RUN_ADDR      ?=
# More flags of `taskd dev` for both, e.g. RUN_ARGS=-articles=100.
RUN_ARGS      ?=
# `make run` and `make observe` recipes: a signal to make alone stops them too.
# make passes no SIGINT on to a recipe and a SIGTERM only to its shell, so the
# recipe's shell is replaced (exec) by scripts/with-services.sh, which gets make's
# SIGTERM, and watches make (TASKD_SERVICES_PARENT=$$PPID, make's pid) for the rest.
# taskd is pointed at the servers with-services.sh started (config.yaml names the ones
# at the default port base), and at RUN_ADDR when given.
RUN_STORES = redis=$${TASKD_TEST_REDIS_URL\#redis://}; \
	TASKD_MYSQL_DSN=$$TASKD_TEST_MYSQL_DSN TASKD_REDIS_ADDRS=$${redis%%/*} $(if $(RUN_ADDR),TASKD_HTTP_ADDR=$(RUN_ADDR))

# staticcheck from PATH, else where `go install` puts it (installed on first use).
GOBIN        = $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
STATICCHECK  = $(or $(shell command -v staticcheck 2>/dev/null),$(GOBIN)/staticcheck)

# Redocly CLI for lint-openapi, installed with npm into a cache directory on first use
# (it needs Node.js 20.19 or later; .ci/run provides one).
REDOCLY_VERSION ?= 2.77.0
REDOCLY_DIR     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/taskd/redocly-cli-$(REDOCLY_VERSION)
REDOCLY          = $(REDOCLY_DIR)/node_modules/.bin/redocly

.DEFAULT_GOAL := help
.PHONY: help test test-jaeger bench bench-month chaos soak lint lint-openapi build image run observe clean screenshots services-up services-down services-status

help: ## List the targets
	@echo 'usage: make TARGET'
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## Run all tests with -race against real Redis and MariaDB, started and stopped around them (the nested modules internal/apiclient and deploy/kubernetes too, and the tests built without -race, unless PKG is given)
	TASKD_TEST_REQUIRE_SERVICES=1 scripts/with-services.sh sh -c '\
		$(GO) test -race -count=1 $(TESTFLAGS) $(PKG) && \
		if [ "$(PKG)" = ./... ]; then \
			$(GO) test -count=1 -run "^TestParkedLongPollStacks$$" $(TESTFLAGS) ./internal/api/ && \
			(cd internal/apiclient && $(GO) test -race -count=1 $(TESTFLAGS) ./...) && \
			(cd deploy/kubernetes && $(GO) test -race -count=1 $(TESTFLAGS) ./...); fi'

test-jaeger: ## Run the Jaeger tests: taskd's traces as a real Jaeger v2 shows them (internal/jaegertest), and make observe (TestMakeObserve), with the services; Jaeger is built once (scripts/jaeger.sh) and cached
	jaeger=$$(GO=$(GO) scripts/jaeger.sh) && \
	TASKD_JAEGER="$$jaeger" TASKD_TEST_REQUIRE_JAEGER=1 TASKD_TEST_REQUIRE_SERVICES=1 scripts/with-services.sh sh -c '\
		$(GO) test -race -count=1 $(TESTFLAGS) ./internal/jaegertest/ && \
		$(GO) test -race -count=1 -run "^TestMakeObserve$$" $(TESTFLAGS) .'

bench: build ## Run taskd-bench -scenario all (bench/cmd/taskd-bench; compared pairs 3 times, targets on the medians), the locker vs bsm/redislock comparison, River vs taskd's workers (bench/river, on PostgreSQL) and the Go benchmarks (JSON in bin/), with the services (the MariaDB replica, the 3-node Galera cluster and PostgreSQL too) up
	$(GO) build -o bin/taskd-bench ./bench/cmd/taskd-bench
	TASKD_TEST_REQUIRE_SERVICES=1 TASKD_SERVICES_PROFILE=bench scripts/with-services.sh sh -c '\
		redis_addr=$${TASKD_TEST_REDIS_URL#redis://}; \
		TASKD_MYSQL_DSN="$$TASKD_TEST_MYSQL_DSN" TASKD_MYSQL_REPLICA_DSN="$$TASKD_TEST_MYSQL_REPLICA_DSN" TASKD_REDIS_ADDRS="$${redis_addr%%/*}" \
		TASKD_GALERA_DSN="$$TASKD_TEST_GALERA_DSN" TASKD_GALERA_ADDRS="$$TASKD_TEST_GALERA_ADDRS" \
			bin/taskd-bench -binary bin/taskd -scenario all -json bin/bench-results.json $(BENCHARGS) && \
		(cd bench/redislock && $(GO) run ./cmd/compare -json ../../bin/locker-vs-redislock.json) && \
		(cd bench/river && $(GO) run ./cmd/compare -json ../../bin/taskd-vs-river.json $(RIVERARGS)) && \
		$(GO) test -run "^$$" -bench "$(BENCH)" -benchmem $(BENCHFLAGS) $(PKG)'

bench-month: build ## Run the long form of taskd-bench's scenario (k), a month in an hour: workers and editors at full speed for 40 minutes (5 million tasks or more) with done tasks purged after 5 minutes, with the services up (JSON in bin/bench-month.json; not part of make bench or make test)
	$(GO) build -o bin/taskd-bench ./bench/cmd/taskd-bench
	TASKD_TEST_REQUIRE_SERVICES=1 TASKD_SERVICES_PROFILE=redis,mariadb scripts/with-services.sh sh -c '\
		redis_addr=$${TASKD_TEST_REDIS_URL#redis://}; \
		TASKD_MYSQL_DSN="$$TASKD_TEST_MYSQL_DSN" TASKD_REDIS_ADDRS="$${redis_addr%%/*}" \
			bin/taskd-bench -scenario month-long -json bin/bench-month.json $(BENCHARGS)'

chaos: build ## Run the fault suite once: taskd, Redis and MariaDB killed and hung, hostile requests; then on a 3-node Galera cluster, a node killed, hung and cut off; then the first faults again with a staged, overlapped workload (own servers; JSON in bin/chaos.json, bin/chaos-galera.json, bin/chaos-workflow.json)
	TASKD_SERVICES_PROFILE=redis,mariadb,galera scripts/services.sh install
	$(GO) run ./internal/chaos/cmd/chaos -taskd bin/taskd -json bin/chaos.json $(CHAOSFLAGS)
	$(GO) run ./internal/chaos/cmd/chaos -galera -taskd bin/taskd -json bin/chaos-galera.json $(CHAOSFLAGS)
	$(GO) run ./internal/chaos/cmd/chaos -workflow -taskd bin/taskd -json bin/chaos-workflow.json $(CHAOSFLAGS)

soak: build ## Run the fault suite in a loop until 100,000 assignments, 30 minutes at most (JSON in bin/soak.json)
	scripts/services.sh install
	$(GO) run ./internal/chaos/cmd/chaos -soak -assignments 100000 -duration 30m -every 2s -taskd bin/taskd -json bin/soak.json $(CHAOSFLAGS)

lint: ## gofmt, go vet, staticcheck, and a check that go mod tidy changes nothing (in the nested modules internal/apiclient and deploy/kubernetes too)
	@echo '$(GOFMT) -l .'; files=$$($(GOFMT) -l .); \
		if [ -n "$$files" ]; then echo "not gofmt-formatted:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	@test -x '$(STATICCHECK)' || { echo 'installing staticcheck'; $(GO) install honnef.co/go/tools/cmd/staticcheck@latest; }
	'$(STATICCHECK)' ./...
	$(GO) mod tidy -diff
	cd internal/apiclient && $(GO) vet ./... && '$(STATICCHECK)' ./... && $(GO) mod tidy -diff
	cd deploy/kubernetes && $(GO) vet ./... && '$(STATICCHECK)' ./... && $(GO) mod tidy -diff

lint-openapi: ## Lint the OpenAPI document (internal/api/openapi.yaml) with Redocly CLI's recommended rules: any error or warning fails, but those ignored with their reason in internal/api/.redocly.lint-ignore.yaml
	@test -x '$(REDOCLY)' || { echo 'installing @redocly/cli@$(REDOCLY_VERSION) in $(REDOCLY_DIR)'; \
		npm install --prefix '$(REDOCLY_DIR)' --no-audit --no-fund --loglevel=error '@redocly/cli@$(REDOCLY_VERSION)'; }
	@echo 'redocly lint --extends recommended internal/api/openapi.yaml'
	@cd internal/api && problems=$$(REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		'$(REDOCLY)' lint --extends recommended --format=stylish openapi.yaml); status=$$?; \
		if [ -n "$$problems" ]; then echo "$$problems"; exit 1; fi; exit $$status

build: ## Build bin/taskd
	$(GO) build -o bin/taskd ./cmd/taskd

image: ## Build the container image localhost/taskd:latest from the Containerfile with buildah, offline: bin/image/taskd built here static, with the host's CA bundle (docs/deployment.md)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/image/taskd ./cmd/taskd
	cp /etc/ssl/certs/ca-certificates.crt bin/image/ca-certificates.crt
	buildah bud --isolation chroot --storage-driver vfs --build-arg TASKD_BUILD=prebuilt -t localhost/taskd:latest .

run: build ## Run `taskd dev` against its own Redis and MariaDB (port base 26300, database taskd) until Ctrl-C, SIGINT or SIGTERM, then stop them
	TASKD_SERVICES_PARENT=$$PPID TASKD_SERVICES_PORT_BASE=$(RUN_PORT_BASE) TASKD_SERVICES_PROFILE=demo TASKD_SERVICES_DATABASE=taskd \
		exec scripts/with-services.sh sh -c '$(RUN_STORES) exec bin/taskd dev $(RUN_ARGS)'

observe: build ## Run `taskd dev` as make run does, with its traces in a Jaeger v2 (built once, as for test-jaeger) and a Prometheus scraping it with deploy/'s rules; prints their URLs; Ctrl-C stops it all
	jaeger=$$(GO=$(GO) scripts/jaeger.sh) && \
	TASKD_JAEGER=$$jaeger TASKD_SERVICES_PARENT=$$PPID TASKD_SERVICES_PORT_BASE=$(RUN_PORT_BASE) TASKD_SERVICES_PROFILE=observe TASKD_SERVICES_DATABASE=taskd \
		TASKD_HTTP_ADDR=$(or $(RUN_ADDR),127.0.0.1:8080) exec scripts/with-services.sh scripts/observe.sh bin/taskd $(RUN_ARGS)

clean: ## Remove build output
	rm -rf bin

screenshots: ## Regenerate the screenshots of README.md and docs/ (docs/screenshots) with the browser tests, against their own servers
	TASKD_TEST_REQUIRE_SERVICES=1 TASKD_TEST_ARTIFACTS=$(CURDIR)/docs/screenshots scripts/with-services.sh \
		$(GO) test -count=1 -run '^(TestBrowserSubmitShowsNext|TestBrowserPhoneWidth|TestBrowserOpsPool|TestBrowserOpsTasksAndEditors|TestBrowserOpsPhoneWidth|TestBrowserOpsBulkActions|TestBrowserOpsTaskHistory|TestBrowserReviewSendBack|TestBrowserCapacitySwitch|TestBrowserOpsWorkflow|TestBrowserOpsAgreement|TestBrowserInstructionsConfirm|TestBrowserOpsInstructions|TestBrowserDraftKeptAfterLostClaim|TestBrowserWorkingTime|TestBrowserGold|TestBrowserOpsRoutes|TestBrowserHedgeDoneBySomeoneElse)$$' ./internal/web/

services-up: ## Start the test servers and leave them up; prints their environment
	scripts/services.sh up

services-down: ## Stop the test servers
	scripts/services.sh down

services-status: ## Show which test servers are running
	scripts/services.sh status
