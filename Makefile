# sheetd: `make run` starts the service, `make test` runs every test. Both install what they
# need on a fresh Debian/Ubuntu machine with the Swift toolchain.

SWIFT ?= swift
# postgresql: the tests start private PostgreSQL servers (initdb in a temporary directory);
# libpq-dev: sheetd's `--database` client; nginx: the load balancer of `make cluster`.
APT_PACKAGES := libmicrohttpd-dev libgnutls28-dev libjansson-dev libsqlite3-dev pkg-config openssl curl \
	postgresql libpq-dev nginx
ARGS ?=

.PHONY: cluster run test stress-tests build release deps check check-openapi check-metrics check-container container-check fuzz sanitizers clean check-playground check-cluster playground-screenshot

# Installs the C libraries sheetd links against and the servers the tests start, only when one
# is missing. The packages' own services (the default PostgreSQL cluster, nginx on port 80) are
# not started: a policy-rc.d that refuses every start is in place during the install when the
# machine has none (tests and `make cluster` start their own, privately).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=/usr/sbin/policy-rc.d; \
			printf '#!/bin/sh\nexit 101\n' | $$SUDO tee $$policy >/dev/null && $$SUDO chmod +x $$policy; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
		status=$$?; [ -z "$$policy" ] || $$SUDO rm -f $$policy; exit $$status; \
	fi

build: deps
	$(SWIFT) build

# The release build, full LTO included, comes from deploy/build-release alone.
release: deps
	SWIFT=$(SWIFT) deploy/build-release

run: release
	.build/release/sheetd $(ARGS)

# sheetd scaled out on this machine: a private PostgreSQL (data in .build/cluster, port 54329,
# run as an unprivileged user), three release sheetd instances on it (--database) and nginx
# round robin in front on port 8080 (CLUSTER_* variables: deploy/cluster). Ctrl-C stops them all.
cluster: release
	deploy/cluster .build/release/sheetd

# Three runs, one after the other: every in-process target (in parallel), then the integration
# target alone, because it starts sheetd processes and loads sockets (Tests/README.md), then the
# playground page in a real headless Chromium (.ci/check-playground installs Debian's chromium
# and chromium-driver when missing and starts its own sheetd).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip SheetdIntegrationTests
	$(SWIFT) test --skip-build --filter SheetdIntegrationTests
	.ci/check-playground

check-playground: build
	.ci/check-playground

# make cluster's script on ports of its own: shared state through nginx, the playground's browser
# tests through it, and Ctrl-C stopping every process.
check-cluster: build
	.ci/check-cluster

# Runs the browser tests and keeps their screenshot of the page mid-interception as the
# picture README shows.
playground-screenshot: build
	PLAYGROUND_SCREENSHOT=$(CURDIR)/docs/playground.png .ci/check-playground

# The whole suite N times (default 3) while two busy loops hog the cores; fails on any red run
# or on a sheetd left running.
N ?= 3
stress-tests: deps
	.ci/stress-tests $(N)

# The checks CI runs after the tests: the spec against a live server (schemathesis), /metrics
# through promtool, and the Dockerfile (hadolint, the release binary's ldd).
check: check-openapi check-metrics check-container

check-openapi: build
	.ci/check-openapi

check-metrics: build
	.ci/check-metrics

check-container: deps
	.ci/check-container

# Slower (about 1 min the first time, 20 s cached, plus 50 s of browser tests): runs the release
# binary inside a minimal Debian bookworm root built with debootstrap from exactly the runtime
# stage's packages, and the playground's browser tests against it (with and without API keys).
container-check: deps
	.ci/check-container --rootfs --playground

# Bounded libFuzzer run on the request decoders plus an HTTP-level fuzz against a live sheetd.
fuzz: deps
	.ci/fuzz

# The whole test suite under AddressSanitizer and ThreadSanitizer (separate scratch paths).
sanitizers: deps
	.ci/sanitizers

clean:
	rm -rf .build .build-*

include bench/Makefile.fragment
