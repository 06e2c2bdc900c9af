// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "PushMedia",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "PushMedia", targets: ["PushMedia"]),
        .executable(name: "pushmedia", targets: ["pushmedia"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
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
        // The only C code: one fixed-signature function per variadic libvips/libcurl call,
        // plus the libcurl callbacks (write, progress, open-socket) and libmagic/GLib helpers.
        .target(
            name: "CPushMediaShim",
            dependencies: ["CVips", "CCurl", "CMagic"],
            path: "Sources/CPushMediaShim",
            cSettings: [.unsafeFlags(["-Wall", "-Wextra", "-Wno-unused-parameter"])],
            linkerSettings: [.linkedLibrary("magic")]),
        .target(
            name: "PushMedia",
            dependencies: ["CPushMediaShim"],
            path: "Sources/PushMedia"),
        .executableTarget(
            name: "pushmedia",
            dependencies: [
                "PushMedia",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/pushmedia"),
        .testTarget(
            name: "PushMediaTests",
            dependencies: ["PushMedia"],
            path: "Tests/PushMediaTests"),
    ]
)
