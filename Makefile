# PushMedia — the two entry points of the README, plus helpers.
SWIFT ?= swift

.PHONY: run test setup build release clean

## Install missing system libraries, build, and rewrite every payload in samples/.
run: setup release
	.build/release/pushmedia batch samples --out out --store pushmedia-store

## Install missing system libraries and run the whole test suite.
test: setup
	$(SWIFT) test

setup:
	@scripts/setup.sh

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

clean:
	rm -rf .build out pushmedia-store
