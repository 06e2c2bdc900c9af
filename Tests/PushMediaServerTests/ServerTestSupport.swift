import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import _CryptoExtras

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

/// A Google service account for project `shop-1234` (a fresh RSA key; its token endpoint
/// `tokenURI`), written owner-only as the relays require: the file's path.
func serviceAccountFile(in directory: TemporaryDirectory, tokenURI: String = "https://oauth.test/token") throws
    -> String
{
    let account = directory.file("sa.json")
    let json = JSONValue.object(
        JSONObject([
            ("type", .string("service_account")), ("project_id", .string("shop-1234")),
            ("private_key", .string(try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)),
            ("client_email", .string("sa@shop-1234.iam.gserviceaccount.com")), ("token_uri", .string(tokenURI)),
        ])
    ).serialized()
    try Data(json).write(to: URL(fileURLWithPath: account))
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: account)
    return account
}
