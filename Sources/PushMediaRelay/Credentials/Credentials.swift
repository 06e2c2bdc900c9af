import Crypto
import Foundation
import NIOSSL
import PushMedia
import _CryptoExtras

/// An APNs credential the relay holds: a `.p8` key of a team, or an app's TLS client certificate.
struct APNsCredential: Sendable {
    enum Auth: Sendable {
        /// Token auth: the key's raw P-256 scalar, its ID (`kid`) and team (`iss`).
        case token(teamID: String, keyID: String, key: Data)
        /// Certificate auth: the chain (leaf first), its key, and what the leaf says.
        case certificate(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, identity: CertificateIdentity)
    }

    /// In logs and metrics.
    var name: String
    var auth: Auth
    /// Topics it is chosen for; empty for the `--apns-key` shorthand, which takes every topic no
    /// entry names.
    var topics: Set<String>
    /// `production` or `development`; nil: the relay's `--apns-upstream`.
    var environment: String?
    /// Client certificate subjects (or common names) allowed to use it; empty: every client the
    /// listener accepts.
    var clients: [String]
    /// SHA-256 of everything that defines it (files' bytes included): an entry reloaded unchanged
    /// keeps its connections. Never shown.
    var fingerprint: [UInt8]

    /// The certificate's identity, for a certificate entry.
    var certificate: CertificateIdentity? {
        if case let .certificate(_, _, identity) = auth { return identity }
        return nil
    }
}

/// A Firebase service account the FCM relay holds for one project.
struct FCMCredential: Sendable {
    var name: String
    var projectID: String
    var clientEmail: String
    var privateKeyID: String?
    var key: _RSA.Signing.PrivateKey
    var tokenURI: String
    var clients: [String]
    var fingerprint: [UInt8]
}

/// A validated set of credentials with its indexes: APNs entries by topic, FCM entries by project.
struct CredentialSet: Sendable {
    private(set) var apns: [APNsCredential] = []
    private(set) var fcm: [FCMCredential] = []
    private var byTopic: [String: Int] = [:]
    private var catchAll: Int?
    private var byProject: [String: Int] = [:]

    init() {}

    /// Refuses a topic, a project or a name given twice, and two catch-all keys.
    init(apns: [APNsCredential], fcm: [FCMCredential]) throws(CredentialsError) {
        var problems: [CredentialsError] = []
        var names: [String: [String]] = [:]
        for (index, entry) in apns.enumerated() {
            if names["apns", default: []].contains(entry.name) {
                problems.append(.entry(section: "apns", name: entry.name, problem: "the name is used twice"))
            }
            names["apns", default: []].append(entry.name)
            if entry.topics.isEmpty {
                if let other = catchAll {
                    problems.append(
                        .entry(
                            section: "apns", name: entry.name,
                            problem: "no topics, and \"\(apns[other].name)\" already takes every other topic"))
                }
                catchAll = index
            }
            for topic in entry.topics.sorted() {
                if let other = byTopic[topic] {
                    problems.append(.duplicateTopic(topic: topic, first: apns[other].name, second: entry.name))
                } else {
                    byTopic[topic] = index
                }
            }
        }
        for (index, entry) in fcm.enumerated() {
            if names["fcm", default: []].contains(entry.name) {
                problems.append(.entry(section: "fcm", name: entry.name, problem: "the name is used twice"))
            }
            names["fcm", default: []].append(entry.name)
            if let other = byProject[entry.projectID] {
                problems.append(.duplicateProject(project: entry.projectID, first: fcm[other].name, second: entry.name))
            } else {
                byProject[entry.projectID] = index
            }
        }
        if problems.count == 1 { throw problems[0] }
        if !problems.isEmpty { throw .several(problems) }
        self.apns = apns
        self.fcm = fcm
    }

    /// Suffixes Apple appends to an app's bundle ID for other push types: such a topic goes with
    /// its app's entry when no entry names it exactly.
    static let topicSuffixes = [
        ".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity", ".location-query", ".voip-ptt",
        ".push-type.widgets", ".push-type.controls",
    ]

    /// The entry for `topic`: the one naming it, else its app's (the topic without Apple's
    /// suffix), else the catch-all key.
    func apns(forTopic topic: String) -> APNsCredential? {
        if let index = byTopic[topic] { return apns[index] }
        for suffix in Self.topicSuffixes where topic.hasSuffix(suffix) {
            if let index = byTopic[String(topic.dropLast(suffix.count))] { return apns[index] }
        }
        return catchAll.map { apns[$0] }
    }

    /// The entry for a Firebase project.
    func fcm(forProject project: String) -> FCMCredential? { byProject[project].map { fcm[$0] } }

    var isEmpty: Bool { apns.isEmpty && fcm.isEmpty }
}

/// Reads the credentials files and the files they name. Every file holding a secret must be
/// readable by its owner only. Blocking: run it off Swift's cooperative pool.
enum CredentialFiles {
    /// Why a file cannot be used (no secret in it).
    struct Problem: Error, CustomStringConvertible {
        var text: String
        init(_ text: String) { self.text = text }
        var description: String { text }
    }

    /// `path`'s bytes, refused when group or others may read it (`what` says what it holds).
    static func readPrivate(_ path: String, holding what: String) -> Result<[UInt8], Problem> {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return .failure(Problem("cannot read \(path): \(String(cString: strerror(errno)))"))
        }
        let mode = UInt32(info.st_mode) & 0o777
        if mode & 0o044 != 0 {
            let who = [mode & 0o040 != 0 ? "group" : nil, mode & 0o004 != 0 ? "others" : nil].compactMap { $0 }
            return .failure(
                Problem(
                    "\(path) is readable by \(who.joined(separator: " and ")) (mode \(String(mode, radix: 8))) but "
                        + "holds \(what); make it the owner's only: chmod 600 \(path)"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(Problem("cannot read \(path)"))
        }
        return .success(Array(data))
    }

    /// A `.p8` key's raw P-256 scalar.
    static func providerKey(_ path: String) -> Result<Data, Problem> {
        switch readPrivate(path, holding: "a provider key") {
        case let .failure(problem): return .failure(problem)
        case let .success(bytes):
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
            else {
                return .failure(Problem("\(path) is not a P-256 private key in PEM (an AuthKey_<id>.p8 from Apple)"))
            }
            return .success(key.rawRepresentation)
        }
    }

    /// A certificate and its key: a PKCS#12 file, or PEM holding both (the key encrypted when a
    /// password is given).
    static func certificate(_ path: String, password: [UInt8]?, name: String)
        -> Result<(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, bytes: [UInt8]), CredentialsError>
    {
        let bytes: [UInt8]
        switch readPrivate(path, holding: "a certificate's private key") {
        case let .failure(problem): return .failure(.entry(section: "apns", name: name, problem: problem.text))
        case let .success(read): bytes = read
        }
        func fail(_ problem: String) -> Result<
            (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, bytes: [UInt8]), CredentialsError
        > {
            .failure(.entry(section: "apns", name: name, problem: problem))
        }
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        if bytes.starts(with: Array("-----BEGIN".utf8))
            || String(decoding: bytes.prefix(4096), as: UTF8.self).contains("-----BEGIN")
        {
            guard let certificates = try? NIOSSLCertificate.fromPEMBytes(bytes), !certificates.isEmpty else {
                return fail("\(path) holds no PEM certificate")
            }
            chain = certificates
            do {
                if let password {
                    key = try NIOSSLPrivateKey(bytes: bytes, format: .pem) { setter in setter(password) }
                } else {
                    key = try NIOSSLPrivateKey(bytes: bytes, format: .pem)
                }
            } catch {
                return fail(
                    password == nil
                        ? "\(path) holds no unencrypted PEM private key (an encrypted one needs password_file or "
                            + "password_env)"
                        : "\(path): no PEM private key that this password opens")
            }
        } else {
            do {
                let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: password ?? [])
                chain = bundle.certificateChain
                key = bundle.privateKey
            } catch {
                let text = "\(error)"
                if ["UNKNOWN_ALGORITHM", "UNSUPPORTED_CIPHER", "UNKNOWN_CIPHER", "UNSUPPORTED_ENCRYPTION"].contains(
                    where: text.contains)
                {
                    return .failure(.legacyPKCS12(name: name, path: path))
                }
                if ["INCORRECT_PASSWORD", "BAD_DECRYPT", "PKCS12_R_MAC"].contains(where: text.contains) {
                    return fail("\(path): wrong password")
                }
                return fail("\(path) is neither a PKCS#12 file this password opens nor PEM (\(Self.sslReason(text)))")
            }
            guard !chain.isEmpty else { return fail("\(path) holds no certificate") }
        }
        // The key must be the certificate's: a TLS context refuses a pair that does not match.
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateChain = chain.map { .certificate($0) }
        tls.privateKey = .privateKey(key)
        do { _ = try NIOSSLContext(configuration: tls) } catch {
            return fail("\(path): the private key is not the certificate's (\(Self.sslReason("\(error)")))")
        }
        return .success((chain, key, bytes))
    }

    /// BoringSSL's reason codes from an error's text (no data of the file).
    static func sslReason(_ text: String) -> String {
        let reasons = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
            .filter { $0.count > 3 && $0.uppercased() == $0 && $0.contains("_") }
        return reasons.isEmpty ? "unreadable" : reasons.map(String.init).joined(separator: ", ")
    }
}
