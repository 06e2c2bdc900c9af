# PushMedia — the two entry points of the README, plus helpers.
SWIFT ?= swift

.PHONY: run test lint format setup setup-test build release clean asan tsan sanitize fuzz fuzz-smoke object-store-stop \
	release-static deb deb-test image image-test

## Install missing system libraries, build the `pushmedia` program only (not the tests or the
## fuzz targets), link it as ./pushmedia, and rewrite every payload in samples/.
run: setup release
	ln -sf .build/release/pushmedia pushmedia
	./pushmedia batch samples --out out --store pushmedia-store

## Check the format (`make lint`), install missing system libraries (and Chromium for the
## browser tests), start the real S3-compatible object store the store and fleet tests use
## (scripts/object-store.sh: OpenStack Swift on 127.0.0.1, installed from Debian's packages when
## missing) and the PostgreSQL the fleet's tests coordinate through (scripts/postgres.sh: Debian's
## server, a cluster of its own on 127.0.0.1), and run every suite once under a sanitizer (a
## plain debug build would catch nothing that one does not; `swift test` runs it plainly): the
## suites that exercise concurrency (TSAN_SUITES) under ThreadSanitizer, every other one under
## AddressSanitizer. Tests run one at a time: several check answers against deadlines, which
## needs cores that other tests are not saturating.
## Then the binary that ships (scripts/release-static.sh: release, the Swift runtime linked in,
## shared by the container image and the Debian package) is what the scripts run:
## Schemathesis checks the HTTP hook's answers against its OpenAPI document
## (scripts/api-conformance.sh), real APNs clients from PyPI push through the APNs relay to a
## strict stand-in for Apple (scripts/apns-relay.sh), and real FCM clients through the FCM relay
## to a strict stand-in for Google (scripts/fcm-relay.sh); both relays are attacked (rapid reset,
## CONTINUATION and PING floods, slow read, slow handshakes, …) while a legitimate client pushes,
## and answer RFC 9113's protocol errors frame by frame (scripts/relay-attacks.sh); media URLs
## made by imgproxy's URL builders are fetched by curl, Chromium and through nginx as a CDN
## (scripts/media-url.sh); the shell examples of README.md and docs/ run against a real server
## (scripts/docs-examples.sh); three nodes behind nginx share one job per media through
## PostgreSQL, lose a node and the database mid-campaign, and hear purges (scripts/fleet.sh);
## the relays' fair shares are measured beside a fast stand-in
## upstream (scripts/relay-fairness.sh); last, the packaging (docs/deployment.md): the container
## image around the binary run with podman (scripts/image-test.sh), and the Debian package
## installed, its service's command run, removed and purged (scripts/deb-test.sh).
## scripts/timed.sh prints each step's time.
SHIPPED = .build-static/stage/pushmedia
TIMED = scripts/timed.sh
test: lint setup-test
	$(TIMED) asan-suite $(ASAN_TEST) --skip '$(TSAN_SUITES)'
	$(TIMED) tsan-suite $(TSAN_TEST) --filter '$(TSAN_SUITES)'
	$(TIMED) release-static scripts/release-static.sh
	BIN=$(SHIPPED) $(TIMED) api-conformance scripts/api-conformance.sh
	BIN=$(SHIPPED) $(TIMED) apns-relay scripts/apns-relay.sh
	BIN=$(SHIPPED) $(TIMED) fcm-relay scripts/fcm-relay.sh
	BIN=$(SHIPPED) $(TIMED) relay-attacks scripts/relay-attacks.sh
	BIN=$(SHIPPED) $(TIMED) media-url scripts/media-url.sh
	BIN=$(SHIPPED) $(TIMED) docs-examples scripts/docs-examples.sh
	BIN=$(SHIPPED) $(TIMED) fleet scripts/fleet.sh
	$(TIMED) relay-fairness scripts/relay-fairness.sh
	$(TIMED) image-test scripts/image-test.sh
	$(TIMED) deb-test scripts/deb-test.sh

## The code's format (.swift-format: 4 spaces, 120 columns), checked first by `make test`.
FORMATTED = Sources Tests Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)

format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

## The suites that exercise concurrency: executors, gates and deadlines, the pipeline's shared
## jobs and best attempts, stores under concurrent writers, the log sink, the hook's routes and
## memos, bursts and `serve` stopping, the relays' HTTP/2 and exchange, the credentials'
## lifecycle, the fleet, the extension's exactly-once delivery. `make test` runs them under
## ThreadSanitizer and every other suite under AddressSanitizer; `make asan` and `make tsan` run
## the whole suite under one. A suite of `Tests/` named here by its type; a new suite that starts
## threads, tasks or processes that race belongs here.
TSAN_SUITES = \.(BlockingExecutorTests|BoundedConcurrencyTests|DeadlineSemaphoreTests|ProcessResourcesTests|PipelineTests|BestAttemptTests|ResolveTests|StoreTests|LogSinkTests|RouterTests|MediaURLRouteTests|MediaBurstTests|ServeEndToEndTests|RelayHTTP2Tests|RelayExchangeTests|CredentialsLifecycleTests|FleetTests|FleetCoordinationTests|DeliverOnceTests)/

## The test suite under AddressSanitizer / ThreadSanitizer (separate build folders).
## Leak checking is off: the Swift runtime's, Foundation's and SwiftNIO's process-wide singletons
## (thread pools, Process and URLSession bookkeeping) are still allocated at exit and would be
## reported on every run. Memory errors (overflows, use after free) are what ASan checks here.
## No index store: nothing reads it, and writing it costs every compile.
ASAN_TEST = env ASAN_OPTIONS=detect_leaks=0 PUSHMEDIA_TEST_SANITIZER=address \
	  $(SWIFT) test --no-parallel --sanitize=address --disable-index-store --scratch-path .build-asan
TSAN_TEST = env TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/scripts/tsan.supp" \
	  PUSHMEDIA_TEST_SANITIZER=thread \
	  $(SWIFT) test --no-parallel --sanitize=thread --disable-index-store --scratch-path .build-tsan
asan: setup-test
	$(ASAN_TEST)

tsan: setup-test
	$(TSAN_TEST)

sanitize: asan tsan

## libFuzzer: each target for FUZZ_SECONDS (default 600); fuzz-smoke runs each for 30 s.
FUZZ_SECONDS ?= 600
fuzz: setup
	scripts/fuzz.sh all $(FUZZ_SECONDS)

fuzz-smoke: setup
	scripts/fuzz.sh all 30

setup:
	@scripts/setup.sh

setup-test:
	@scripts/setup.sh --test
	@scripts/object-store.sh start
	@scripts/postgres.sh start

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release --product pushmedia

## Packaging (docs/deployment.md). The image and the Debian package ship one binary: release,
## the Swift runtime linked in statically, built in .build-static (scripts/release-static.sh).
release-static: setup
	@scripts/release-static.sh

## pushmedia_<version>_<arch>.deb at the top of the repository (scripts/deb.sh).
deb: release-static
	@scripts/deb.sh

## The package installed, its service's command run as systemd would, removed and purged.
deb-test: release-static
	scripts/deb-test.sh

## The container image from the whole Containerfile, compile stage included:
## localhost/pushmedia:<version> with podman (ENGINE=docker for Docker). Without a registry,
## scripts/container-env.sh makes the base images here first.
image:
	scripts/image.sh --full

## That image built, then run and checked (scripts/image-test.sh --full). `make test` checks the
## image around the shared release binary instead (no compiler in the image build).
image-test:
	scripts/image-test.sh --full

## Stop the test object store (its data stays under /var/tmp/pushmedia-object-store).
object-store-stop:
	@scripts/object-store.sh stop

clean:
	rm -rf .build .build-asan .build-tsan .build-fuzz .build-static out pushmedia pushmedia-store pushmedia_*.deb
