# PushMedia — the two entry points of the README, plus helpers.
SWIFT ?= swift

.PHONY: run test setup build release clean asan tsan sanitize fuzz fuzz-smoke

## Install missing system libraries, build, and rewrite every payload in samples/.
run: setup release
	.build/release/pushmedia batch samples --out out --store pushmedia-store

## Install missing system libraries and run the whole test suite. Tests run one at a time:
## several check answers against deadlines, which needs cores that other tests are not saturating.
test: setup
	$(SWIFT) test --no-parallel

## The test suite under AddressSanitizer / ThreadSanitizer (separate build folders).
asan: setup
	$(SWIFT) test --no-parallel --sanitize=address --scratch-path .build-asan

tsan: setup
	$(SWIFT) test --no-parallel --sanitize=thread --scratch-path .build-tsan

sanitize: asan tsan

## libFuzzer: each target for FUZZ_SECONDS (default 600); fuzz-smoke runs each for 30 s.
FUZZ_SECONDS ?= 600
fuzz: setup
	scripts/fuzz.sh all $(FUZZ_SECONDS)

fuzz-smoke: setup
	scripts/fuzz.sh all 30

setup:
	@scripts/setup.sh

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

clean:
	rm -rf .build .build-asan .build-tsan .build-fuzz out pushmedia-store
