import Crypto
import Foundation
import NIOCore
import NIOEmbedded
import PushMedia
import PushMediaTestSupport
import SwiftASN1
import Testing
import X509
import _CryptoExtras

@testable import PushMediaRelay

/// The credentials file and what it names: parsing, the checks that refuse an entry, topics read
/// from certificates, service-account assertions, reconnect backoff. The relays use them end to
/// end, with real clients and stand-ins for Apple and Google, in `scripts/apns-relay.sh` and
/// `scripts/fcm-relay.sh`.
@Suite("Relay credentials")
struct RelayCredentialsTests {
    let directory = TemporaryDirectory()

    /// Writes `text` to `name`, owner-only unless `mode` says otherwise.
    func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        let path = directory.path + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    func p8(_ name: String = "AuthKey_K1.p8", mode: Int = 0o600) throws -> String {
        try write(name, P256.Signing.PrivateKey().pemRepresentation, mode: mode)
    }

    func load(_ text: String) throws(CredentialsError) -> CredentialSet {
        let path: String
        do { path = try write("credentials.yaml", text) } catch { preconditionFailure("\(error)") }
        return try CredentialsFile.load(path, environment: ["LEGACY_PW": "secret"])
    }

    @Test func topicsPickTheirEntryAndAppleSuffixesGoWithTheirApp() throws {
        let shop = try p8("shop.p8")
        let news = try p8("news.p8")
        let set = try load(
            """
            apns:
              - name: shop
                team_id: ABCDE12345
                key_id: ABC123DEFG
                key: \(shop)
                topics: [com.shop.app, com.shop.app.voip]
              - {name: news, team_id: OTHER12345, key_id: KEY2, key: \(news), topics: [com.news.app]}
            """)
        #expect(set.apns(forTopic: "com.shop.app")?.name == "shop")
        #expect(set.apns(forTopic: "com.shop.app.voip")?.name == "shop")
        #expect(set.apns(forTopic: "com.news.app.complication")?.name == "news")
        #expect(set.apns(forTopic: "com.news.app.push-type.liveactivity")?.name == "news")
        #expect(set.apns(forTopic: "com.other.app") == nil)
        #expect(set.apns(forTopic: "com.news") == nil)
    }

    @Test func jsonIsReadToo() throws {
        let account = try serviceAccount()
        let set = try load(#"{"fcm": [{"name": "shop", "project_id": "shop-1234", "service_account": "\#(account)"}]}"#)
        #expect(set.fcm(forProject: "shop-1234")?.clientEmail == "sa@shop-1234.iam.gserviceaccount.com")
        #expect(set.fcm(forProject: "other") == nil)
    }

    @Test func aTopicInTwoEntriesIsRefusedNamingBoth() throws {
        let key = try p8()
        #expect {
            try load(
                """
                apns:
                  - {name: one, team_id: T1, key_id: K1, key: \(key), topics: [com.a.app]}
                  - {name: two, team_id: T2, key_id: K2, key: \(key), topics: [com.a.app]}
                """)
        } throws: { error in
            "\(error)".contains("com.a.app") && "\(error)".contains("\"one\"") && "\(error)".contains("\"two\"")
        }
    }

    @Test func filesReadableByOthersAreRefusedSayingHowToFixThem() throws {
        let open = try p8("open.p8", mode: 0o644)
        #expect {
            try load("apns:\n  - {name: shop, team_id: T1, key_id: K1, key: \(open), topics: [a.b]}\n")
        } throws: { error in
            let text = "\(error)"
            return text.contains("\"shop\"") && text.contains("group and others") && text.contains("chmod 600 \(open)")
        }
        let path = try write("exposed.yaml", "apns: []\n", mode: 0o640)
        #expect { try CredentialsFile.load(path, environment: [:]) } throws: { "\($0)".contains("readable by group") }
    }

    @Test func entriesThatCannotBeUsedAreRefusedByName() throws {
        let key = try p8()
        let p384 = try write("p384.p8", P384.Signing.PrivateKey().pemRepresentation)
        let noKey = try write("no-key.json", #"{"type": "service_account", "client_email": "a@b"}"#)
        let cases: [(String, [String])] = [
            ("apns:\n  - {name: k, team_id: T1, key_id: K1, key: \(p384), topics: [a.b]}\n", ["\"k\"", "P-256"]),
            ("apns:\n  - {name: t, team_id: T1, key_id: K1, key: \(key)}\n", ["\"t\"", "no topics"]),
            (
                "apns:\n  - {name: u, team_id: T1, key_id: K1, key: \(key), topic: [a.b]}\n",
                ["\"u\"", "unknown setting"]
            ),
            ("fcm:\n  - {name: f, project_id: p-1, service_account: \(noKey)}\n", ["\"f\"", "private_key"]),
            ("apns:\n  - {name: m, certificate: /nonexistent.p12}\n", ["\"m\"", "cannot read"]),
            ("apns: [\n", ["not YAML", "line"]),
        ]
        for (text, needles) in cases {
            #expect(throws: CredentialsError.self, "\(text)") { try load(text) }
            do {
                _ = try load(text)
            } catch {
                let message = "\(error)"
                #expect(needles.allSatisfy(message.contains), "\(message)")
            }
        }
    }

    @Test func aCertificatesTopicsAndEnvironmentAreReadFromIt() throws {
        let (pem, _) = try pushCertificate(bundle: "com.legacy.app", topics: ["com.legacy.app", "com.legacy.app.voip"])
        let path = try write("legacy.pem", pem)
        let set = try load("apns:\n  - {name: legacy, certificate: \(path), environment: production}\n")
        let entry = try #require(set.apns(forTopic: "com.legacy.app.voip"))
        #expect(entry.name == "legacy")
        #expect(entry.topics == ["com.legacy.app", "com.legacy.app.voip"])
        #expect(entry.certificate?.daysLeft() == 9)
        #expect {
            try load("apns:\n  - {name: legacy, certificate: \(path), environment: development}\n")
        } throws: { "\($0)".contains("production only") }
        #expect {
            try load("apns:\n  - {name: legacy, certificate: \(path), topics: [x]}\n")
        } throws: { "\($0)".contains("read from the certificate") }
    }

    @Test func extensionTopicsInBothLayouts() throws {
        func utf8(_ text: String) -> [UInt8] { [0x0C, UInt8(text.utf8.count)] + Array(text.utf8) }
        func sequence(_ body: [UInt8]) -> [UInt8] { [0x30, UInt8(body.count)] + body }
        let flat = sequence(utf8("a.b") + sequence(utf8("app")) + utf8("a.b.voip") + sequence(utf8("voip")))
        #expect(CertificateIdentity.topics(inExtension: flat) == ["a.b", "a.b.voip"])
        let nested = sequence(sequence(utf8("a.b") + sequence(utf8("app"))))
        #expect(CertificateIdentity.topics(inExtension: nested) == ["a.b"])
        #expect(CertificateIdentity.topics(inExtension: [0x04, 0x00]).isEmpty)
    }

    @Test func serviceAccountAssertionsVerifyWithTheAccountsKey() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let credential = FCMCredential(
            name: "shop", projectID: "shop-1234", clientEmail: "sa@shop-1234.iam.gserviceaccount.com",
            privateKeyID: "kid1", key: key, tokenURI: "https://127.0.0.1:1/token", clients: [], fingerprint: [])
        let token = try ServiceAccountToken(
            credential: credential, timeout: .seconds(1), limits: RelayLimits(), extraCA: nil,
            logger: .init(label: "test"))
        let assertion = token.assertion(issuedAt: 1_700_000_000)
        let parts = assertion.split(separator: ".")
        try #require(parts.count == 3)
        let headerBytes = try #require(Base64URL.decode(parts[0]))
        let claimBytes = try #require(Base64URL.decode(parts[1]))
        let header = try #require(try JSONValue.parse(headerBytes).objectValue)
        let claims = try #require(try JSONValue.parse(claimBytes).objectValue)
        #expect(header["alg"] == .string("RS256") && header["kid"] == .string("kid1"))
        #expect(claims["iss"] == .string("sa@shop-1234.iam.gserviceaccount.com"))
        #expect(claims["aud"] == .string("https://127.0.0.1:1/token"))
        #expect(claims["scope"] == .string(ServiceAccountToken.scope))
        #expect(claims["iat"] == .number("1700000000") && claims["exp"] == .number("1700003600"))
        let signatureBytes = try #require(Base64URL.decode(parts[2]))
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signatureBytes)
        let input = Array("\(parts[0]).\(parts[1])".utf8)
        #expect(key.publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        #expect(!other.publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
    }

    @Test func tokenAnswers() {
        func answer(_ status: Int, _ body: String) -> UpstreamAnswer {
            UpstreamAnswer(status: status, headers: [:], body: .init(string: body))
        }
        guard
            case let .success((token, lifetime)) = ServiceAccountToken.token(
                in: answer(200, #"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#))
        else {
            Issue.record("a good answer was refused")
            return
        }
        #expect(token == "ya29.x" && lifetime == .seconds(3599))
        guard case let .failure(failure) = ServiceAccountToken.token(in: answer(400, #"{"error":"invalid_grant"}"#))
        else {
            Issue.record("a refusal was taken")
            return
        }
        #expect("\(failure)" == "the token endpoint answered 400 invalid_grant")
        guard case .failure(.malformed) = ServiceAccountToken.token(in: answer(200, "{}")) else {
            Issue.record("an empty answer was taken")
            return
        }
    }

    @Test func reconnectsBackOff() {
        let backoff = ReconnectBackoff()
        let start = ContinuousClock.now
        #expect(backoff.refusal(pool: "a", now: start) == nil)
        backoff.failed(pool: "a", now: start)
        #expect(backoff.refusal(pool: "a", now: start + .milliseconds(100)) != nil)
        #expect(backoff.refusal(pool: "b", now: start + .milliseconds(100)) == nil)
        #expect(backoff.refusal(pool: "a", now: start + .milliseconds(300)) == nil)
        backoff.failed(pool: "a", now: start + .milliseconds(300))
        #expect(backoff.refusal(pool: "a", now: start + .milliseconds(700)) != nil)
        #expect(backoff.refusal(pool: "a", now: start + .milliseconds(850)) == nil)
        backoff.succeeded(pool: "a")
        backoff.failed(pool: "a", now: start + .seconds(1))
        #expect(backoff.refusal(pool: "a", now: start + .seconds(1) + .milliseconds(300)) == nil)
    }

    @Test func anIdleUpstreamConnectionIsPingedAfterAnHour() throws {
        let loop = EmbeddedEventLoop()
        let handler = UpstreamConnectionHandler(
            authority: "upstream.test", timeout: .seconds(10), limits: RelayLimits()
        ) {}
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        func written() throws -> [UInt8] {
            loop.run()
            var bytes: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
            return bytes
        }
        // A PING frame: length 8, type 6, no flags, stream 0.
        let ping: [UInt8] = [0, 0, 8, 6, 0, 0, 0, 0, 0]
        func pings(_ bytes: [UInt8]) -> Int {
            guard bytes.count >= ping.count else { return 0 }
            return (0...(bytes.count - ping.count)).filter { bytes[$0..<($0 + ping.count)].elementsEqual(ping) }.count
        }
        #expect(pings(try written()) == 0)
        loop.advanceTime(by: .minutes(59))
        #expect(pings(try written()) == 0)
        loop.advanceTime(by: .minutes(2))
        #expect(pings(try written()) == 1)
        loop.advanceTime(by: .minutes(30))
        #expect(pings(try written()) == 0)
        _ = try? channel.finish()
    }

    @Test func entriesListingClientsTakeThoseOnly() {
        let client = RelayClient(subject: "CN=sender,O=Shop", commonName: "sender", appleTopics: [])
        #expect(RelayClient.allowed(nil, by: []))
        #expect(!RelayClient.allowed(nil, by: ["sender"]))
        #expect(RelayClient.allowed(client, by: ["sender"]))
        #expect(RelayClient.allowed(client, by: ["CN=sender,O=Shop"]))
        #expect(!RelayClient.allowed(client, by: ["other"]))
    }

    // MARK: fixtures

    func serviceAccount() throws -> String {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let json = JSONValue.object(
            JSONObject([
                ("type", .string("service_account")), ("project_id", .string("shop-1234")),
                ("private_key", .string(key.pemRepresentation)),
                ("client_email", .string("sa@shop-1234.iam.gserviceaccount.com")),
            ])
        ).serialized()
        return try write("sa.json", String(decoding: json, as: UTF8.self))
    }

    /// A push certificate as Apple issues one (self-signed here, valid 9.5 days) and its key, in PEM.
    func pushCertificate(bundle: String, topics: [String]) throws -> (pem: String, key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        func utf8(_ text: String) -> [UInt8] { [0x0C, UInt8(text.utf8.count)] + Array(text.utf8) }
        var items: [UInt8] = []
        for topic in topics { items += utf8(topic) + [0x30, 5] + utf8("app") }
        let topicsValue = [0x30, UInt8(items.count)] + items
        let name = DistinguishedName([
            RelativeDistinguishedName([
                RelativeDistinguishedName.Attribute(type: CertificateIdentity.uidOID, utf8String: bundle)
            ]),
            RelativeDistinguishedName([
                RelativeDistinguishedName.Attribute(
                    type: .RDNAttributeType.commonName, utf8String: "Apple Push Services: \(bundle)")
            ]),
        ])
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now - 3600, notValidAfter: now + 9.5 * 86400, issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Certificate.Extension(oid: CertificateIdentity.productionOID, critical: false, value: [0x05, 0x00])
                Certificate.Extension(
                    oid: CertificateIdentity.topicsOID, critical: false, value: ArraySlice(topicsValue))
            },
            issuerPrivateKey: .init(key))
        return (try certificate.serializeAsPEM().pemString + "\n" + key.pemRepresentation, key)
    }
}
