# PushMedia — the two entry points of the README, plus helpers.
SWIFT ?= swift

.PHONY: run test setup build release clean

## Install missing system libraries, build, and rewrite every payload in samples/.
run: setup release
	.build/release/pushmedia batch samples --out out --store pushmedia-store

## Install missing system libraries and run the whole test suite. Tests run one at a time:
## several check answers against deadlines, which needs cores that other tests are not saturating.
test: setup
	$(SWIFT) test --no-parallel

setup:
	@scripts/setup.sh

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

clean:
	rm -rf .build out pushmedia-store
