import Crypto
import Foundation
import NIOCore
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaRelay

/// The relay's parts that need no network: provider tokens, the settings' rules, what counts as
/// a rich alert. The relay itself runs end to end, with real APNs clients, in
/// `scripts/apns-relay.sh`.
@Suite("APNs relay parts")
struct APNsRelayTests {
    /// A `.p8` key as Apple issues it: PKCS #8 PEM.
    static func keyFile() throws -> (path: String, key: P256.Signing.PrivateKey, directory: TemporaryDirectory) {
        let directory = TemporaryDirectory()
        let key = P256.Signing.PrivateKey()
        let path = directory.path + "/AuthKey_ABC123DEFG.p8"
        try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return (path, key, directory)
    }

    @Test func ownTokensVerifyWithTheKeyAndAreReused() throws {
        let (path, key, directory) = try Self.keyFile()
        _ = directory
        let signer = ProviderTokenSigner(
            key: try CredentialFiles.providerKey(path).get(), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let start = ContinuousClock.now
        let first = signer.authorization(now: start)
        #expect(signer.authorization(now: start + .seconds(39 * 60)) == first)
        let renewed = signer.authorization(now: start + .seconds(41 * 60))
        #expect(renewed.hasPrefix("bearer "))

        let token = String(first.dropFirst(7))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let headerBytes = try #require(Base64URL.decode(parts[0]))
        let claimBytes = try #require(Base64URL.decode(parts[1]))
        let header = try #require(try JSONValue.parse(headerBytes).objectValue)
        let claims = try #require(try JSONValue.parse(claimBytes).objectValue)
        #expect(header["alg"] == .string("ES256"))
        #expect(header["kid"] == .string("ABC123DEFG"))
        #expect(claims["iss"] == .string("TEAM123456"))
        guard case let .number(issued)? = claims["iat"], let seconds = Double(issued) else {
            Issue.record("iat is not a number: \(claims)")
            return
        }
        #expect(abs(seconds - Date().timeIntervalSince1970) < 5)
        let signatureBytes = try #require(Base64URL.decode(parts[2]))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        #expect(key.publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(
            !P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8))
        )
        #expect(ProviderToken.team(ofAuthorization: first) == "TEAM123456")
    }

    @Test func aKeyThatIsNotP256IsRefusedByName() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/AuthKey.p8"
        try "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect { try CredentialFiles.providerKey(path).get() } throws: {
            "\($0)".contains(path) && "\($0)".contains("P-256")
        }
    }

    @Test func teamOfAClientToken() {
        let claims = Base64URL.encode(Array(#"{"iss":"ABCDE12345","iat":1700000000.5}"#.utf8))
        #expect(ProviderToken.team(ofAuthorization: "bearer eyJhbGciOiJFUzI1NiJ9.\(claims).sig") == "ABCDE12345")
        #expect(ProviderToken.team(ofAuthorization: "Bearer x.\(claims).y") == "ABCDE12345")
        #expect(ProviderToken.team(ofAuthorization: "bearer not-a-jwt") == nil)
        #expect(ProviderToken.team(ofAuthorization: "basic x.\(claims).y") == nil)
        let numeric = Base64URL.encode(Array(#"{"iss":12345}"#.utf8))
        #expect(ProviderToken.team(ofAuthorization: "bearer x.\(numeric).y") == nil)
    }

    @Test func richAlertsOnly() {
        let rich = Array(#"{"aps":{"alert":"Hi","mutable-content":1},"media_url":"https://x/y"}"#.utf8)
        #expect(APNsPolicy.richAlert(rich, pushType: nil) != nil)
        #expect(APNsPolicy.richAlert(rich, pushType: "alert") != nil)
        let noMutable = Array(#"{"aps":{"alert":"Hi"},"media_url":"https://x/y"}"#.utf8)
        #expect(APNsPolicy.richAlert(noMutable, pushType: nil) == nil)
        let noAlert = Array(#"{"aps":{"mutable-content":1},"media_url":"https://x/y"}"#.utf8)
        #expect(APNsPolicy.richAlert(noAlert, pushType: nil) == nil)
        #expect(APNsPolicy.richAlert(noAlert, pushType: "alert") != nil)
        #expect(APNsPolicy.richAlert(Array("not json".utf8), pushType: nil) == nil)
        #expect(APNsPolicy.payloadLimit(pushType: "voip") == 5120)
        #expect(APNsPolicy.payloadLimit(pushType: nil) == 4096)
    }

    @Test func refusalsHaveApplesShapeAndAnID() throws {
        let answer = APNsPolicy.refusal(404, "BadPath", apnsID: nil)
        #expect(answer.status == 404)
        #expect(UUID(uuidString: try #require(answer.headers.first(name: "apns-id"))) != nil)
        let body = try #require(answer.body)
        #expect(APNsPolicy.reason(of: body) == "BadPath")
        #expect(APNsPolicy.refusal(405, "MethodNotAllowed", apnsID: "A-1").headers.first(name: "apns-id") == "A-1")
    }

    @Test func settingsThatGoTogether() throws {
        var config = RelaysConfig()
        try config.set("apns-port", to: "0")
        try config.apns.validate()
        let (key, _, directory) = try Self.keyFile()
        _ = directory
        try config.set("apns-key", to: key)
        #expect { try config.apns.validate() } throws: { "\($0)".contains("--apns-key-id and --apns-team-id") }
        try config.set("apns-key-id", to: "ABC123DEFG")
        try config.set("apns-team-id", to: "TEAM123456")
        try config.apns.validate()
        try config.set("apns-tls-cert", to: key)
        #expect { try config.apns.validate() } throws: { "\($0)".contains("go together") }
        #expect { try config.set("apns-upstream", to: "http://example.com") } throws: {
            "\($0)".contains("--apns-upstream")
        }
        #expect { try config.set("apns-tls-key", to: "/nonexistent/key.pem") } throws: {
            "\($0)".contains("readable file")
        }
        try config.set("apns-upstream", to: "https://127.0.0.1:8443")
        #expect(config.apns.upstreamEndpoint == .init(host: "127.0.0.1", port: 8443))
        #expect(APNsRelayConfig().upstreamEndpoint == .init(host: "api.push.apple.com", port: 443))
    }
}
