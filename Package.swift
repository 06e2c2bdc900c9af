// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "PushMedia",
    platforms: [.macOS(.v14), .iOS(.v15)],
    products: [
        .library(name: "PushMedia", targets: ["PushMedia"]),
        // For the app's Notification Service Extension: Foundation only, no system libraries.
        .library(name: "PushMediaNSE", targets: ["PushMediaNSE"]),
        .executable(name: "pushmedia", targets: ["pushmedia"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The settings file (`--config`) and the relays' credentials file: YAML, and JSON as YAML.
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // X.509 of Apple's push certificates (the relays' held credentials).
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // A fleet's coordination (`--fleet-db`): leases, notifications, in PostgreSQL.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Traces: the API the pipeline, the relays and the fleet instrument with, and the
        // protobuf runtime of the OTLP types the exporter sends (PushMediaTrace).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.31.0"),
    ],
    targets: [
        // System libraries: headers and link flags only. Nothing but the shim includes them.
        .systemLibrary(
            name: "CVips", path: "Sources/CVips", pkgConfig: "vips",
            providers: [.apt(["libvips-dev"]), .brew(["vips"])]),
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]),
        .systemLibrary(
            name: "CMagic", path: "Sources/CMagic",
            providers: [.apt(["libmagic-dev"]), .brew(["libmagic"])]),
        .systemLibrary(
            name: "CNghttp2", path: "Sources/CNghttp2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["libnghttp2"])]),
        // The only C code: one fixed-signature function per variadic libvips/libcurl call,
        // plus the libcurl callbacks (write, progress, open-socket) and libmagic/GLib helpers.
        .target(
            name: "CPushMediaShim",
            dependencies: ["CVips", "CCurl", "CMagic"],
            path: "Sources/CPushMediaShim",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Wno-unused-parameter"])],
            linkerSettings: [.linkedLibrary("magic")]),
        // The relays' HTTP/2 (libnghttp2): sessions fed bytes and drained of events; the server only.
        .target(
            name: "CHTTP2Shim",
            dependencies: ["CNghttp2"],
            path: "Sources/CHTTP2Shim",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Wno-unused-parameter"])]),
        // The one table of media formats (MIME type, UTI, extension, kind), read by the server and
        // by the phone's library: no system libraries.
        .target(
            name: "PushMediaFormats",
            path: "Sources/PushMediaFormats"),
        .target(
            name: "PushMedia",
            dependencies: [
                "CPushMediaShim",
                "PushMediaFormats",
                // SHA-256 by BoringSSL: the CPU's SHA instructions where it has them.
                .product(name: "Crypto", package: "swift-crypto"),
                // Spans of a payload's steps (no exporter: a no-op unless the server sets one).
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/PushMedia"),
        // A fleet's coordination through PostgreSQL (`--fleet-db`): one job per media across the
        // nodes (`JobCoordinator`), purges heard by every node.
        .target(
            name: "PushMediaFleet",
            dependencies: [
                "PushMedia",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/PushMediaFleet"),
        // The phone side: reads the descriptor, downloads the attachment within the extension's
        // time, calls the content handler once. Apple glue behind canImport(UserNotifications).
        .target(
            name: "PushMediaNSE",
            dependencies: ["PushMediaFormats"],
            path: "Sources/PushMediaNSE"),
        // The relays: the APNs relay (`APNs/`) and the FCM relay (`FCM/`) on one listener
        // (`Transport/`), one exchange (`Exchange/`) and one upstream client (`Upstream/`), with
        // many apps' credentials (`Credentials/`): SwiftNIO for sockets and TLS, libnghttp2 for
        // HTTP/2 (swift-nio-http2 only for its HPACK types). A product within the product: it
        // depends on the library and on what the server hands it (`RelayParts`), never on the
        // hook.
        .target(
            name: "PushMediaRelay",
            dependencies: [
                "PushMedia",
                "CHTTP2Shim",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The held credentials: certificates' topics, RS256 for Google.
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/PushMediaRelay"),
        // Traces out of the process: PushMedia's tracer (spans as plain values, a lock-free ring,
        // ids per thread) and its exporter thread posting OTLP/HTTP (protobuf) with libcurl.
        // `Generated/`: opentelemetry-proto's common, resource, trace and trace-service types as
        // protoc-gen-swift generates them (taken unchanged from swift-otel 1.6.0).
        .target(
            name: "PushMediaTrace",
            dependencies: [
                "PushMedia",
                "CPushMediaShim",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/PushMediaTrace"),
        // The HTTP hook: thin Hummingbird routes over the library, and `serve`'s wiring of the
        // hook, the relays and the fleet.
        .target(
            name: "PushMediaServer",
            dependencies: [
                "PushMedia",
                "PushMediaFleet",
                "PushMediaRelay",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                // The tracer and exporter of `--otel-endpoint`.
                "PushMediaTrace",
            ],
            path: "Sources/PushMediaServer",
            resources: [.copy("openapi.yaml")]),
        .executableTarget(
            name: "pushmedia",
            dependencies: [
                "PushMedia",
                "PushMediaFleet",
                "PushMediaRelay",
                "PushMediaServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/pushmedia"),
        // Fuzzing: the entry points (also replayed by the tests) and one libFuzzer executable for all,
        // built with -sanitize=fuzzer by scripts/fuzz.sh (plain builds replay files instead).
        .target(
            name: "PushMediaFuzzTargets",
            dependencies: ["PushMedia", "CHTTP2Shim"],
            path: "Sources/PushMediaFuzzTargets"),
        .executableTarget(
            name: "fuzz",
            dependencies: ["PushMediaFuzzTargets"],
            path: "Sources/Fuzz/fuzz"),
        // A fast stand-in for Apple's and Google's servers (SwiftNIO's HTTP/2), for the relays'
        // fairness tests and benchmarks: every request answered after a hold.
        .executableTarget(
            name: "relay-standin",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/RelayStandin"),
        // The floor of `GET /healthz` (bench/healthz.sh): a bare Hummingbird application.
        .executableTarget(
            name: "healthz-floor",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird")],
            path: "Sources/HealthzFloor"),
        // Shared by the test targets: a real HTTP origin on 127.0.0.1, samples, temp dirs.
        .target(
            name: "PushMediaTestSupport",
            dependencies: ["PushMedia", .product(name: "_CryptoExtras", package: "swift-crypto")],
            path: "Tests/Support"),
        .testTarget(
            name: "PushMediaTests",
            dependencies: ["PushMedia", "PushMediaTestSupport", "PushMediaFuzzTargets"],
            path: "Tests/PushMediaTests"),
        .testTarget(
            name: "PushMediaNSETests",
            dependencies: ["PushMediaNSE", "PushMedia", "PushMediaTestSupport"],
            path: "Tests/PushMediaNSETests"),
        // The relays through their own parts (`RelayParts` with test metrics and lines), without
        // the server.
        .testTarget(
            name: "PushMediaRelayTests",
            dependencies: [
                "PushMediaRelay",
                "PushMediaTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tests/PushMediaRelayTests"),
        // The span path on its own: the ring, the OTLP encoding, the tracer's propagation.
        .testTarget(
            name: "PushMediaTraceTests",
            dependencies: [
                "PushMediaTrace",
                "PushMedia",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Tests/PushMediaTraceTests"),
        .testTarget(
            name: "PushMediaServerTests",
            dependencies: [
                "PushMediaServer",
                "PushMediaRelay",
                "PushMediaFleet",
                "PushMediaTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tests/PushMediaServerTests"),
    ]
)

// The release-mode builds share one build of the dependencies (scripts/release-tree.sh): the
// binary that ships, and the package's own modules again for each sanitizer. They differ only in
// what the lines below add to the package's own targets and to `pushmedia`'s link, so that every
// dependency's compile command is the same in all three.
//
// PUSHMEDIA_SANITIZE=address or thread: the package's own targets instrumented, unoptimised, with
// debug information and testable, and compiled as a debug build compiles them (files in batches,
// and again only where a change reaches: SwiftPM's release mode passes neither flag); the
// dependencies stay optimised and uninstrumented (their code is not what the suites check).
if let sanitizer = Context.environment["PUSHMEDIA_SANITIZE"], !sanitizer.isEmpty {
    for target in package.targets where target.type != .system {
        target.swiftSettings =
            (target.swiftSettings ?? []) + [
                .unsafeFlags([
                    "-sanitize=\(sanitizer)", "-Onone", "-no-whole-module-optimization", "-enable-batch-mode",
                    "-incremental", "-g", "-enable-testing",
                ])
            ]
        target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=\(sanitizer)", "-O0", "-g"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
}

// PUSHMEDIA_STATIC_STDLIB=1 (scripts/release-static.sh): the Swift runtime and Foundation linked
// into `pushmedia` statically. Only that link changes. (SwiftPM's --static-swift-stdlib would
// compile every module against the static SDK, which has no swift-testing, so the sanitizer
// builds could not share the dependencies.) Modules compiled against the shared Foundation
// name only libFoundation for the linker; the archives the static one needs are listed here.
if Context.environment["PUSHMEDIA_STATIC_STDLIB"] == "1" {
    let archives = [
        "Foundation", "FoundationEssentials", "FoundationInternationalization", "_FoundationICU", "CoreFoundation",
        "_FoundationCShims", "_FoundationCollections", "swiftSynchronization",
    ]
    for target in package.targets where target.name == "pushmedia" {
        target.linkerSettings =
            (target.linkerSettings ?? []) + [
                .unsafeFlags(
                    ["-static-stdlib", "-Xlinker", "--start-group"] + archives.flatMap { ["-Xlinker", "-l\($0)"] }
                        + ["-Xlinker", "--end-group"])
            ]
    }
}
