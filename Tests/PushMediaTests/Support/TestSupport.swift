import Foundation
@testable import PushMedia

/// The repository's `samples/` directory.
let samplesDirectory: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("samples").path
}()

/// Bytes of a file under `samples/media/`.
func sampleMedia(_ name: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: samplesDirectory + "/media/" + name)))
}

/// A fresh directory under the system temp dir, removed by `cleanup()`.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "pushmedia-test-" + UUID().uuidString.prefix(12)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A configuration for tests: its own store, loopback allowed (the test origin is on 127.0.0.1).
func testConfig(store: TemporaryDirectory, budget: Duration = .seconds(10), allowPrivate: Bool = true) -> PushMediaConfig {
    var config = PushMediaConfig()
    config.storeDirectory = store.path
    config.baseURL = "https://cdn.example.com/m"
    config.budget = budget
    config.allowPrivateNetworks = allowPrivate
    return config
}

/// An APNs payload with an alert, mutable-content and `extra` top-level keys.
func payload(_ extra: [(String, JSONValue)], alert: Bool = true) -> JSONObject {
    var aps = JSONObject()
    if alert {
        aps["alert"] = .object(JSONObject([("title", .string("Hello")), ("body", .string("Fresh deals inside"))]))
        aps["mutable-content"] = .number("1")
    } else {
        aps["content-available"] = .number("1")
    }
    return JSONObject([("aps", .object(aps))] + extra)
}

extension PipelineResult {
    /// The descriptor the rewrite added.
    var descriptor: JSONObject? { payload["pushmedia"]?.objectValue }
}

/// The file names in the store's temporary area (must be empty after every job).
func leftovers(_ store: TemporaryDirectory) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: store.path + "/.incoming")) ?? []
}

/// Store files whose names are not final content-addressed names (a half-written file would show here).
func nonFinalStoreFiles(_ store: TemporaryDirectory) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: store.path)) ?? [])
        .filter { !$0.hasPrefix(".") && !MediaStore.isValidName($0) }
}
