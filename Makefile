# sheetd: `make run` starts the service, `make test` runs every test. Both install what they
# need on a fresh Debian/Ubuntu machine with the Swift toolchain.

SWIFT ?= swift
APT_PACKAGES := libmicrohttpd-dev libjansson-dev libsqlite3-dev pkg-config
ARGS ?=

.PHONY: run test build release deps check-openapi check-container container-check bench clean

# Installs the C libraries sheetd links against, only when one is missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	.build/release/sheetd $(ARGS)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

clean:
	rm -rf .build
