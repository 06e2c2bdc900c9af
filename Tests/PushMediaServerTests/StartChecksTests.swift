import Crypto
import Foundation
import PushMedia
import PushMediaTestSupport
import Testing
import X509
import _CryptoExtras

@testable import PushMediaRelay
@testable import PushMediaServer

/// `pushmedia check-config FILE` and `pushmedia serve --config FILE` on the same settings files:
/// each file that one calls valid the other starts, and each that one refuses the other refuses
/// with the same message (`StartChecks`, the one home of the rules both run).
@Suite("Start checks")
struct StartChecksTests {
    let directory = TemporaryDirectory()

    /// A file in the test's folder, owner-only.
    func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        let path = directory.file(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    /// A self-signed certificate for localhost and its key, in PEM files.
    func certificate() throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("localhost") }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: now - 3600,
            notValidAfter: now + 86400, issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(), issuerPrivateKey: .init(key))
        return (
            try write("relay.pem", try certificate.serializeAsPEM().pemString),
            try write("relay-key.pem", key.pemRepresentation)
        )
    }

    /// The table: a settings file's text, and whether both must call it valid.
    func table() throws -> [(name: String, text: String, valid: Bool)] {
        let tls = try certificate()
        let notAKey = try write("not-a-key.pem", "not a key\n")
        let p8 = try write("AuthKey_ABC123DEFG.p8", P256.Signing.PrivateKey().pemRepresentation)
        let openP8 = try write("AuthKey_OPEN.p8", P256.Signing.PrivateKey().pemRepresentation, mode: 0o644)
        let badCredentials = try write("bad-credentials.yaml", "apns: [\n")
        let account = try serviceAccountFile(in: directory)
        let credentials = try write(
            "credentials.yaml", "fcm:\n  - {name: shop, project_id: shop-1234, service_account: \(account)}\n")
        let key = "apns-key: \(p8)\napns-key-id: ABC123DEFG\napns-team-id: TEAM123456\n"
        return [
            ("public hook without auth", "host: 0.0.0.0\n", false),
            ("public hook with a token", "host: 0.0.0.0\ntoken: [a-token-0123456789]\n", true),
            ("public hook, insecure-no-auth", "host: 0.0.0.0\ninsecure-no-auth: true\n", true),
            (
                "open media URLs in public", "host: 0.0.0.0\ntoken: [a-token-0123456789]\nurl-allow-source: ['*']\n",
                false
            ),
            ("a URL key without its salt", "url-key: [0a1b]\n", false),
            ("public APNs relay, no restriction", "apns-port: 0\napns-host: 0.0.0.0\n", false),
            (
                "public APNs relay, teams allowed", "apns-port: 0\napns-host: 0.0.0.0\napns-allow-team: [TEAM123456]\n",
                true
            ),
            ("public FCM relay, no restriction", "fcm-port: 0\nfcm-host: 0.0.0.0\n", false),
            (
                "public FCM relay, projects allowed",
                "fcm-port: 0\nfcm-host: 0.0.0.0\nfcm-allow-project: [shop-1234]\n", true
            ),
            ("fleet worker without fleet-db", "fleet-worker: 1\n", false),
            ("a fleet database that is down", "fleet-db: postgres://pm@127.0.0.1:1/pm\n", true),
            ("APNs TLS certificate without key", "apns-port: 0\napns-tls-cert: \(tls.certificate)\n", false),
            ("FCM client CA without TLS", "fcm-port: 0\nfcm-client-ca: \(tls.certificate)\n", false),
            (
                "APNs TLS key that is not one",
                "apns-port: 0\napns-tls-cert: \(tls.certificate)\napns-tls-key: \(notAKey)\n", false
            ),
            ("APNs over TLS", "apns-port: 0\napns-tls-cert: \(tls.certificate)\napns-tls-key: \(tls.key)\n", true),
            ("FCM over TLS", "fcm-port: 0\nfcm-tls-cert: \(tls.certificate)\nfcm-tls-key: \(tls.key)\n", true),
            ("APNs key without its ID and team", "apns-port: 0\napns-key: \(p8)\n", false),
            (
                "APNs key readable by others",
                "apns-port: 0\napns-key: \(openP8)\napns-key-id: ABC123DEFG\napns-team-id: TEAM123456\n", false
            ),
            ("APNs key on loopback", "apns-port: 0\n" + key, true),
            (
                "APNs key in public, teams allowed",
                "apns-port: 0\napns-host: 0.0.0.0\napns-allow-team: [TEAM123456]\n" + key, false
            ),
            ("a credentials file that does not read", "apns-port: 0\nrelay-credentials: \(badCredentials)\n", false),
            (
                "held service account in public",
                "fcm-port: 0\nfcm-host: 0.0.0.0\nfcm-allow-project: [shop-1234]\nrelay-credentials: \(credentials)\n",
                false
            ),
            ("held service account on loopback", "fcm-port: 0\nrelay-credentials: \(credentials)\n", true),
            ("a port out of range", "port: 99999\n", false),
        ]
    }

    @Test func checkConfigAndServeAgree() async throws {
        let store = directory.file("store")
        let rows = try table()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, row) in rows.enumerated() {
                let file = try write("settings-\(index).yaml", row.text)
                group.addTask {
                    let check = try await SettingsTableTests.pushmedia(["check-config", file])
                    let serve = try await Self.serve(["--config", file, "--store", store])
                    let said = check.stderr.split(separator: "\n").filter {
                        $0.hasPrefix("pushmedia: ") && !$0.hasPrefix("pushmedia: warning:")
                    }
                    #expect(
                        (check.status == 0) == row.valid, "\(row.name): check-config \(check.status) \(check.stderr)")
                    #expect(serve.started == row.valid, "\(row.name): serve \(serve.status) \(serve.stderr)")
                    if !row.valid {
                        #expect(check.status == 65, "\(row.name)")
                        #expect(!said.isEmpty, "\(row.name): \(check.stderr)")
                        for line in said {
                            let message = line.dropFirst("pushmedia: ".count)
                            #expect(serve.stderr.contains(message), "\(row.name): serve said \(serve.stderr)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Either relay on a public address refuses to start unless its senders are restricted, and
    /// starts without a warning once they are.
    @Test func aPublicRelayNeedsRestriction() throws {
        for relay in ["apns", "fcm"] {
            var server = ServerConfig()
            try server.set("\(relay)-port", to: "0")
            try server.set("\(relay)-host", to: "0.0.0.0")
            let restriction = relay == "apns" ? ("apns-allow-team", "TEAM123456") : ("fcm-allow-project", "my-app-1")
            #expect { try StartChecks(config: PushMediaConfig(), server: server, environment: [:]) } throws: {
                "\($0)".contains("--\(restriction.0)")
            }
            try server.set(restriction.0, to: restriction.1)
            #expect(try StartChecks(config: PushMediaConfig(), server: server, environment: [:]).warnings.isEmpty)
        }
    }

    /// What `pushmedia serve` did with `arguments`: started (then stopped with SIGTERM), or
    /// exited with a status and its standard error.
    static func serve(_ arguments: [String]) async throws -> (started: Bool, status: Int32, stderr: String) {
        try await SettingsTableTests.runner.run {
            let (process, out, err) = try SettingsTableTests.started(["serve", "--port", "0"] + arguments)
            let said = Locked("")
            err.fileHandleForReading.readabilityHandler = { handle in
                let chunk = handle.availableData
                said.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
            // Standard output's first line is "PushMedia listening on …" once it started; it
            // ends without one when the process exits.
            var output = Data()
            var started = false
            while true {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
                if String(decoding: output, as: UTF8.self).contains("PushMedia listening on") {
                    started = true
                    process.terminate()
                    break
                }
            }
            process.waitUntilExit()
            err.fileHandleForReading.readabilityHandler = nil
            let rest = err.fileHandleForReading.readDataToEndOfFile()
            let stderr = said.withLock { $0 } + String(decoding: rest, as: UTF8.self)
            return (started, process.terminationStatus, stderr)
        }
    }
}
