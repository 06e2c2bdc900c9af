import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport

@testable import PushMediaServer

/// A router over a fresh store, with loopback origins allowed (the test origin is on 127.0.0.1):
/// `adjust` changes the library's settings, `server` the server's.
final class TestServer: @unchecked Sendable {
    let store = TemporaryDirectory()
    let parts: ServerParts
    let router: Router<AppRequestContext>

    init(
        _ adjust: (inout PushMediaConfig) -> Void = { _ in },
        server adjustServer: (inout ServerConfig) -> Void = { _ in },
        now: @escaping @Sendable () -> Date = Date.init, clock: TestClock? = nil
    ) throws {
        var config = testConfig(store: store)
        config.baseURL = "https://media.example.com/media"
        adjust(&config)
        var server = ServerConfig()
        adjustServer(&server)
        parts = try ServerParts(config: config, server: server, upstreams: .http2, clock: clock?.wall ?? .system)
        router = buildRouter(parts, now: now, clock: clock?.deadlines ?? .continuous)
    }

    func test<Value>(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        try await Application(router: router).test(.router, body)
    }
}

extension ByteBuffer {
    init(json: String) { self.init(string: json) }
    var object: JSONObject? { try? JSONValue.parse(Array(readableBytesView)).objectValue }
}

/// `{"aps":{alert,mutable-content},"media_url":url}` as text.
func payloadJSON(_ url: String, extra: String = "") -> String {
    #"{"aps":{"alert":{"title":"Hi","body":"Sale"},"mutable-content":1},"media_url":"\#(url)"\#(extra)}"#
}
