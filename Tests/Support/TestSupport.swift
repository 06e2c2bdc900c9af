import Foundation
import PushMedia

/// The repository's `samples/` directory.
public let samplesDirectory: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("samples").path
}()

/// Bytes of a file under `samples/media/`.
public func sampleMedia(_ name: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: samplesDirectory + "/media/" + name)))
}

/// Whether the tests run under AddressSanitizer or ThreadSanitizer (`make asan` / `make tsan`).
public let underSanitizer = ProcessInfo.processInfo.environment["PUSHMEDIA_TEST_SANITIZER"] != nil

/// How late an answer due at a deadline may be: scheduling on a loaded machine, more under
/// sanitizers. Work that ignored the deadline would run seconds past it.
public let lateness: Duration = underSanitizer ? .seconds(2) : .milliseconds(500)

/// A budget for work that must finish, in tests that are not about the deadline: room for a
/// loaded machine, more under sanitizers.
public let roomyBudget: Duration = underSanitizer ? .seconds(60) : .seconds(15)

/// Polls `condition` every 5 ms until it holds or `limit` has passed; returns whether it held.
@discardableResult
public func eventually(within limit: Duration = .seconds(10), _ condition: () throws -> Bool) async throws -> Bool {
    let giveUp = ContinuousClock.now + limit
    while try !condition() {
        if ContinuousClock.now >= giveUp { return false }
        try await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// A fresh directory under the system temp dir, removed by `cleanup()`.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String
    public init() {
        path = NSTemporaryDirectory() + "pushmedia-test-" + UUID().uuidString.prefix(12)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    public func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A configuration for tests: its own store, loopback allowed (the test origin is on 127.0.0.1).
public func testConfig(store: TemporaryDirectory, budget: Duration = .seconds(10), allowPrivate: Bool = true)
    -> PushMediaConfig
{
    var config = PushMediaConfig()
    config.storeLocation = store.path
    config.baseURL = "https://cdn.example.com/m"
    config.budget = budget
    config.allowPrivateNetworks = allowPrivate
    return config
}

/// An APNs payload with an alert, mutable-content and `extra` top-level keys.
public func payload(_ extra: [(String, JSONValue)], alert: Bool = true) -> JSONObject {
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
    public var descriptor: JSONObject? { payload["pushmedia"]?.objectValue }
}

/// The files in the store's temporary area, all processes (must be empty after every job).
public func leftovers(_ store: TemporaryDirectory) -> [String] {
    let incoming = store.path + "/.incoming"
    return ((try? FileManager.default.subpathsOfDirectory(atPath: incoming)) ?? []).filter {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: incoming + "/" + $0, isDirectory: &isDirectory)
            && !isDirectory.boolValue
    }
}

/// Store files whose names are not final content-addressed names (a half-written file would show here).
public func nonFinalStoreFiles(_ store: TemporaryDirectory) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: store.path)) ?? [])
        .filter { !$0.hasPrefix(".") && !MediaStore.isValidName($0) }
}

/// The built `pushmedia` executable, beside the test bundle.
public let pushmediaExecutable: String = {
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for directory in [beside, beside.deletingLastPathComponent()] {
        let candidate = directory.appendingPathComponent("pushmedia").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent(".build/debug/pushmedia").path
}()
