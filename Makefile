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
## server, a cluster of its own on 127.0.0.1), then scripts/test.sh: every suite once under a
## sanitizer (a plain debug build would catch nothing that one does not; `swift test` runs it
## plainly), the suites that exercise concurrency under ThreadSanitizer and the others under
## AddressSanitizer; then the binary that ships (scripts/release-static.sh: release, the Swift
## runtime linked in, shared by the container image and the Debian package) is what the scripts
## run: Schemathesis checks the HTTP hook's answers against its OpenAPI document
## (scripts/api-conformance.sh), real APNs clients from PyPI push through the APNs relay to a
## strict stand-in for Apple (scripts/apns-relay.sh), and real FCM clients through the FCM relay
## to a strict stand-in for Google (scripts/fcm-relay.sh); media URLs made by imgproxy's URL
## builders are fetched by curl, Chromium and through nginx as a CDN (scripts/media-url.sh); a
## hook request and media URLs are traced to an OTLP receiver built on opentelemetry-proto from
## PyPI, joined to the caller's traceparent, through a collector outage (scripts/tracing.sh); the
## shell examples of README.md and docs/ run against a real server (scripts/docs-examples.sh);
## the packaging (docs/deployment.md): the container image around the binary run with podman
## (scripts/image-test.sh), and the Debian package installed, its service's command run, removed
## and purged (scripts/deb-test.sh); both relays are attacked (rapid reset, CONTINUATION and PING
## floods, slow read, slow handshakes, …) while a legitimate client pushes, and answer RFC 9113's
## protocol errors frame by frame (scripts/relay-attacks.sh); three nodes behind nginx share one
## job per media through PostgreSQL, lose a node and the database mid-campaign, and hear purges
## (scripts/fleet.sh); the relays' fair shares are measured beside a fast stand-in upstream
## (scripts/relay-fairness.sh). Each step prints its time.
test: lint setup-test
	scripts/test.sh

## The code's format (.swift-format: 4 spaces, 120 columns), checked first by `make test`.
FORMATTED = Sources Tests Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)

format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

## The whole test suite under AddressSanitizer / ThreadSanitizer (the package's own modules
## instrumented over the release build of the dependencies; scripts/release-tree.sh says how).
asan: setup-test
	scripts/test.sh asan

tsan: setup-test
	scripts/test.sh tsan

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
## the Swift runtime linked in statically, built in .build-static/tree, whose dependencies the
## sanitizer builds share (scripts/release-static.sh, scripts/release-tree.sh).
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

## That image built, then run and checked (scripts/image-test.sh --full): its contents against
## docs/deployment.md's list, the parity of its libvips and FFmpeg with the host's, the Kubernetes
## manifests with podman kube play. `make test` checks the
## image around the shared release binary instead (no compiler in the image build).
image-test:
	scripts/image-test.sh --full

## Stop the test object store (its data stays under /var/tmp/pushmedia-object-store).
object-store-stop:
	@scripts/object-store.sh stop

clean:
	rm -rf .build .build-sanitizer .build-asan .build-tsan .build-fuzz .build-static out pushmedia pushmedia-store pushmedia_*.deb
