import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The hook's authentication: bearer tokens, signed requests, and no public listener without it.
extension RouterTests {
    @Test func bearerTokens() async throws {
        let server = try TestServer(server: { $0.tokens = ["s3cret-token", "second"] })
        try await server.test { client in
            for headers: HTTPFields in [[:], [.authorization: "Bearer wrong"], [.authorization: "Basic czNjcmV0"]] {
                try await client.execute(
                    uri: "/v1/process", method: .post, headers: headers, body: ByteBuffer(json: "{}")
                ) { response in
                    #expect(response.status == .unauthorized)
                    #expect(response.body.object?["error"]?.objectValue?["code"] == .string("unauthorized"))
                }
            }
            for token in ["s3cret-token", "second"] {
                try await client.execute(
                    uri: "/v1/process", method: .post, headers: [.authorization: "Bearer \(token)"],
                    body: ByteBuffer(json: "{}")
                ) { response in
                    #expect(response.status == .ok)
                }
            }
            try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/media/" + String(repeating: "a", count: 64) + ".jpg", method: .get) {
                #expect($0.status == .notFound)
            }
        }
    }

    static func sign(_ body: String, secret: String, at time: Int) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("\(time).\(body)".utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "t=\(time),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    @Test func signedRequests() async throws {
        let secret = "a-shared-secret-of-32-bytes-long"
        let fixedNow = Date(timeIntervalSince1970: 1_790_000_000)
        let server = try TestServer(server: { $0.hmacSecret = secret }, now: { fixedNow })
        let body = #"{"aps":{"alert":"hello"}}"#
        let now = Int(fixedNow.timeIntervalSince1970)
        let signature = HTTPField.Name("X-PushMedia-Signature")!
        try await server.test { client in
            try await client.execute(
                uri: "/v1/process", method: .post, headers: [signature: Self.sign(body, secret: secret, at: now - 30)],
                body: ByteBuffer(json: body)
            ) { response in
                #expect(response.status == .ok)
                #expect(response.body.object?["outcome"]?.objectValue?["status"] == .string("skipped"))
            }
            let cases: [(String, String)] = [
                (Self.sign(body, secret: secret, at: now - 400), "more than 300 s"),  // expired
                (Self.sign(body, secret: "another-secret-another-secret!!", at: now), "does not match"),
                (Self.sign(body + " ", secret: secret, at: now), "does not match"),  // body changed
                ("t=\(now)", "must be"),
            ]
            for (header, message) in cases {
                try await client.execute(
                    uri: "/v1/process", method: .post, headers: [signature: header], body: ByteBuffer(json: body)
                ) { response in
                    #expect(response.status == .unauthorized)
                    #expect(
                        response.body.object?["error"]?.objectValue?["message"]?.stringValue?.contains(message) == true,
                        "\(header)")
                }
            }
            try await client.execute(uri: "/v1/process", method: .post, body: ByteBuffer(json: body)) {
                #expect($0.status == .unauthorized)
            }
        }
    }

    @Test func refusesAPublicListenerWithoutAuth() async throws {
        let store = TemporaryDirectory()
        let config = testConfig(store: store)
        var server = ServerConfig()
        server.host = "0.0.0.0"
        await #expect(throws: ExposureError.self) {
            _ = try await buildApplication(
                config: config, server: server, baseURLGiven: true, logger: .init(label: "test"))
        }
        server.tokens = ["t"]
        _ = try await buildApplication(config: config, server: server, baseURLGiven: true, logger: .init(label: "test"))
        server.tokens = []
        server.insecureNoAuth = true
        _ = try await buildApplication(config: config, server: server, baseURLGiven: true, logger: .init(label: "test"))
    }
}
