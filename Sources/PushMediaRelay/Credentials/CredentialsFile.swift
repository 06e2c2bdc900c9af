import Crypto
import Foundation
import NIOSSL
import PushMedia
import Yams
import _CryptoExtras

/// The credentials file (`--relay-credentials`): YAML, or JSON (which YAML reads too), with a list
/// of apps under `apns` and one under `fcm`:
///
/// ```yaml
/// apns:
///   - {name: shop, team_id: ABCDE12345, key_id: ABC123DEFG, key: AuthKey_ABC123DEFG.p8, topics: [com.shop.app]}
///   - {name: legacy, certificate: legacy.p12, password_file: legacy.pass, environment: production}
/// fcm:
///   - {name: shop, project_id: shop-1234, service_account: shop-sa.json}
/// ```
///
/// Every entry may list `clients`: client certificate subjects (or common names) allowed to use it.
/// Reading is blocking (files, key parsing): run it off Swift's cooperative pool.
enum CredentialsFile {
    static let apnsKeys: Set<String> = [
        "name", "team_id", "key_id", "key", "topics", "certificate", "password_file", "password_env", "environment",
        "clients",
    ]
    static let fcmKeys: Set<String> = ["name", "project_id", "service_account", "clients"]
    /// Google's token endpoint, when a service account names none.
    static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    /// Reads and checks the file and every file it names; all problems are reported at once.
    static func load(_ path: String, environment: [String: String]) throws(CredentialsError) -> CredentialSet {
        let bytes: [UInt8]
        switch CredentialFiles.readPrivate(path, holding: "where the relay's keys are") {
        case let .failure(problem): throw .file(path: path, problem: problem.text)
        case let .success(read): bytes = read
        }
        let root: Node
        do {
            guard let composed = try Yams.compose(yaml: String(decoding: bytes, as: UTF8.self)) else {
                throw CredentialsError.file(path: path, problem: "empty; expected apns: and fcm: lists")
            }
            root = composed
        } catch let error as CredentialsError {
            throw error
        } catch {
            throw .file(path: path, problem: "not YAML or JSON: \(Self.syntaxProblem(error))")
        }
        guard let top = root.mapping else {
            throw .file(path: path, problem: "expected a mapping with apns: and fcm: lists")
        }
        var problems: [CredentialsError] = []
        var apnsNodes: [Node] = []
        var fcmNodes: [Node] = []
        for (key, value) in top {
            switch key.string {
            case "apns"?, "fcm"?:
                guard let list = value.sequence else {
                    problems.append(.file(path: path, problem: "\(key.string ?? ""): expected a list of entries"))
                    continue
                }
                if key.string == "apns" { apnsNodes = Array(list) } else { fcmNodes = Array(list) }
            default:
                problems.append(
                    .file(path: path, problem: "unknown key \(key.string ?? "?") at the top (expected apns, fcm)"))
            }
        }
        var apns: [APNsCredential] = []
        for (index, node) in apnsNodes.enumerated() {
            do { apns.append(try apnsEntry(node, index: index, environment: environment)) } catch {
                problems.append(error)
            }
        }
        var fcm: [FCMCredential] = []
        for (index, node) in fcmNodes.enumerated() {
            do { fcm.append(try fcmEntry(node, index: index)) } catch { problems.append(error) }
        }
        if problems.isEmpty {
            do { return try CredentialSet(apns: apns, fcm: fcm) } catch { problems.append(error) }
        }
        let all = problems.flatMap(\.all)
        throw all.count == 1 ? all[0] : .several(all)
    }

    /// An entry's fields as text (lists as `[String]`), unknown keys refused.
    private struct Fields {
        var section: String
        var name: String
        var strings: [String: String] = [:]
        var lists: [String: [String]] = [:]

        init(_ node: Node, section: String, index: Int, allowed: Set<String>) throws(CredentialsError) {
            self.section = section
            name = "#\(index + 1)"
            guard let mapping = node.mapping else {
                throw .entry(section: section, name: name, problem: "expected a mapping of settings")
            }
            for (key, value) in mapping where key.string == "name" {
                if let named = value.string, !named.isEmpty { name = named }
            }
            for (key, value) in mapping {
                guard let key = key.string, allowed.contains(key) else {
                    throw .entry(
                        section: section, name: name,
                        problem:
                            "unknown setting \(key.string ?? "?") (known: \(allowed.sorted().joined(separator: ", ")))"
                    )
                }
                if ["topics", "clients"].contains(key), let one = value.string {
                    lists[key] = [one]
                } else if let list = value.sequence {
                    lists[key] = list.compactMap(\.string)
                    guard lists[key]?.count == list.count else {
                        throw .entry(section: section, name: name, problem: "\(key): expected a list of strings")
                    }
                } else if let text = value.string {
                    strings[key] = text
                } else {
                    throw .entry(section: section, name: name, problem: "\(key): expected text")
                }
            }
            guard strings["name"] != nil else { throw .entry(section: section, name: name, problem: "no name") }
            guard name.utf8.count <= 64, name.allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) }) else {
                throw .entry(section: section, name: name, problem: "a name is letters, digits, '.', '_' and '-'")
            }
        }

        func problem(_ text: String) -> CredentialsError { .entry(section: section, name: name, problem: text) }

        func required(_ key: String, _ what: String) throws(CredentialsError) -> String {
            guard let value = strings[key], !value.isEmpty else { throw problem("no \(key) (\(what))") }
            return value
        }
    }

    private static func apnsEntry(_ node: Node, index: Int, environment: [String: String]) throws(CredentialsError)
        -> APNsCredential
    {
        let fields = try Fields(node, section: "apns", index: index, allowed: apnsKeys)
        let strings = fields.strings
        let tokenKeys = ["team_id", "key_id", "key"].filter { strings[$0] != nil }
        if strings["certificate"] != nil && !tokenKeys.isEmpty {
            throw fields.problem("give a key (with team_id and key_id) or a certificate, not both")
        }
        let environmentName = strings["environment"]
        if let environmentName, !["production", "development"].contains(environmentName) {
            throw fields.problem("environment is production or development, not \(environmentName)")
        }
        var hash = SHA256()
        for part in [
            "apns", fields.name, environmentName ?? "", (fields.lists["clients"] ?? []).joined(separator: "\n"),
        ] {
            hash.update(data: Array(part.utf8) + [0])
        }
        if let certificatePath = strings["certificate"] {
            return try certificateEntry(
                fields, path: certificatePath, environment: environmentName, variables: environment, hash: &hash)
        }
        guard !tokenKeys.isEmpty else {
            throw fields.problem("no credential: give key, team_id and key_id (token auth) or certificate")
        }
        return try keyEntry(fields, environment: environmentName, hash: &hash)
    }

    /// An entry with a `.p8` key (token auth): its team, key ID and topics.
    private static func keyEntry(_ fields: Fields, environment: String?, hash: inout SHA256) throws(CredentialsError)
        -> APNsCredential
    {
        if fields.strings["password_file"] != nil || fields.strings["password_env"] != nil {
            throw fields.problem("password_file and password_env are for a certificate; a .p8 key has none")
        }
        let teamID = try fields.required("team_id", "the key's team, such as ABCDE12345")
        let keyID = try fields.required("key_id", "the key's ID, such as ABC123DEFG")
        for (label, value) in [("team_id", teamID), ("key_id", keyID)]
        where value.utf8.count > 64 || !value.allSatisfy({ $0.isLetter || $0.isNumber }) {
            throw fields.problem("\(label) is letters and digits")
        }
        let keyPath = try fields.required("key", "the path of an AuthKey_<id>.p8")
        guard let topics = fields.lists["topics"], !topics.isEmpty else {
            throw fields.problem("no topics: list the bundle IDs (apns-topic values) this key signs for")
        }
        let key: Data
        switch CredentialFiles.providerKey(keyPath) {
        case let .failure(problem): throw fields.problem(problem.text)
        case let .success(raw): key = raw
        }
        for part in [teamID, keyID, topics.sorted().joined(separator: "\n")] {
            hash.update(data: Array(part.utf8) + [0])
        }
        hash.update(data: key)
        return APNsCredential(
            name: fields.name, auth: .token(teamID: teamID, keyID: keyID, key: key), topics: Set(topics),
            environment: environment, clients: fields.lists["clients"] ?? [], fingerprint: Array(hash.finalize()))
    }

    /// An entry with a push certificate: its topics and environment read from the certificate.
    private static func certificateEntry(
        _ fields: Fields, path certificatePath: String, environment environmentName: String?,
        variables: [String: String], hash: inout SHA256
    ) throws(CredentialsError) -> APNsCredential {
        if fields.lists["topics"] != nil {
            throw fields.problem("a certificate's topics are read from the certificate: remove topics")
        }
        let password = try certificatePassword(fields, variables: variables)
        let loaded: (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, bytes: [UInt8])
        switch CredentialFiles.certificate(certificatePath, password: password, name: fields.name) {
        case let .failure(error): throw error
        case let .success(result): loaded = result
        }
        let identity: CertificateIdentity
        do { identity = try CertificateIdentity(der: try loaded.chain[0].toDERBytes()) } catch {
            throw fields.problem("\(certificatePath): the certificate cannot be read as X.509")
        }
        guard identity.isPushCertificate else {
            throw fields.problem(
                "\(certificatePath) names no push topic (no UID in its subject, no Apple topics extension): "
                    + "not an Apple push certificate")
        }
        if let environmentName, identity.development || identity.production {
            let agrees = environmentName == "production" ? identity.production : identity.development
            guard agrees else {
                throw fields.problem(
                    "environment is \(environmentName) but \(certificatePath) is for "
                        + (identity.production ? "production" : "development") + " only")
            }
        }
        hash.update(data: loaded.bytes)
        hash.update(data: password ?? [])
        return APNsCredential(
            name: fields.name, auth: .certificate(chain: loaded.chain, key: loaded.key, identity: identity),
            topics: identity.topics,
            environment: environmentName ?? (identity.production || !identity.development ? nil : "development"),
            clients: fields.lists["clients"] ?? [], fingerprint: Array(hash.finalize()))
    }

    /// A certificate's password: from `password_file` (its last line break dropped) or the
    /// variable `password_env` names; nil without either.
    private static func certificatePassword(_ fields: Fields, variables: [String: String]) throws(CredentialsError)
        -> [UInt8]?
    {
        switch (fields.strings["password_file"], fields.strings["password_env"]) {
        case (nil, nil): return nil
        case let (file?, nil):
            switch CredentialFiles.readPrivate(file, holding: "a certificate's password") {
            case let .failure(problem): throw fields.problem(problem.text)
            case let .success(bytes):
                var text = bytes
                while let last = text.last, last == 0x0A || last == 0x0D { text.removeLast() }
                return text
            }
        case let (nil, variable?):
            guard let value = variables[variable] else {
                throw fields.problem("password_env \(variable) is not set in the environment")
            }
            return Array(value.utf8)
        default: throw fields.problem("give password_file or password_env, not both")
        }
    }

    private static func fcmEntry(_ node: Node, index: Int) throws(CredentialsError) -> FCMCredential {
        let fields = try Fields(node, section: "fcm", index: index, allowed: fcmKeys)
        let projectID = try fields.required("project_id", "the Firebase project ID, such as shop-1234")
        guard projectID.utf8.count <= 128, projectID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw fields.problem("project_id is letters, digits and '-'")
        }
        let path = try fields.required("service_account", "the path of the service account's JSON key")
        let bytes: [UInt8]
        switch CredentialFiles.readPrivate(path, holding: "a service account's private key") {
        case let .failure(problem): throw fields.problem(problem.text)
        case let .success(read): bytes = read
        }
        guard let account = try? JSONValue.parse(bytes).objectValue else {
            throw fields.problem("\(path) is not a JSON object (a service account key from the Firebase console)")
        }
        func text(_ key: String) -> String? {
            if case let .string(value)? = account[key], !value.isEmpty { return value }
            return nil
        }
        if let type = text("type"), type != "service_account" {
            throw fields.problem("\(path) is of type \(type), not service_account")
        }
        guard let pem = text("private_key") else { throw fields.problem("\(path) has no private_key") }
        guard let email = text("client_email") else { throw fields.problem("\(path) has no client_email") }
        let key: _RSA.Signing.PrivateKey
        do { key = try _RSA.Signing.PrivateKey(pemRepresentation: pem) } catch {
            throw fields.problem("\(path): private_key is not an RSA private key of at least 2048 bits in PEM")
        }
        let tokenURI = text("token_uri") ?? defaultTokenURI
        guard TokenEndpoint(uri: tokenURI) != nil else {
            throw fields.problem("\(path): token_uri \(tokenURI) is not an https:// URL")
        }
        var hash = SHA256()
        for part in ["fcm", fields.name, projectID, (fields.lists["clients"] ?? []).joined(separator: "\n")] {
            hash.update(data: Array(part.utf8) + [0])
        }
        hash.update(data: bytes)
        return FCMCredential(
            name: fields.name, projectID: projectID, clientEmail: email, privateKeyID: text("private_key_id"), key: key,
            tokenURI: tokenURI, clients: fields.lists["clients"] ?? [], fingerprint: Array(hash.finalize()))
    }

    /// A YAML error's problem and position, without the snippet of the file it quotes.
    static func syntaxProblem(_ error: any Error) -> String {
        switch error as? YamlError {
        case let .scanner(_, problem, mark, _)?, let .parser(_, problem, mark, _)?, let .composer(_, problem, mark, _)?:
            return "\(problem) at line \(mark.line), column \(mark.column)"
        case let .reader(problem, offset, _, _)?: return "\(problem) at byte \(offset ?? 0)"
        case let .duplicatedKeysInMapping(duplicates, context)?:
            return "duplicate keys \(duplicates.joined(separator: ", ")) at line \(context.mark.line)"
        default: return "unreadable"
        }
    }
}

/// `pushmedia check-credentials`: a credentials file read as `serve` reads it.
public enum CredentialsCheck {
    /// One line per entry (name, kind, topics or project, expiry; never a secret), or every problem.
    public static func summary(of path: String, environment: [String: String]) throws(CredentialsError) -> [String] {
        let set = try CredentialsFile.load(path, environment: environment)
        var lines: [String] = []
        for entry in set.apns {
            let topics = entry.topics.sorted().joined(separator: ",")
            let environment = entry.environment.map { " environment \($0)" } ?? ""
            switch entry.auth {
            case let .token(teamID, keyID, _):
                lines.append("apns \(entry.name): key \(keyID) of team \(teamID), topics \(topics)\(environment)")
            case let .certificate(_, _, identity):
                let days = identity.daysLeft()
                let expiry = days < 0 ? "EXPIRED \(-days) days ago" : "expires in \(days) days"
                lines.append(
                    "apns \(entry.name): certificate \(identity.subject), topics \(topics)\(environment), \(expiry)")
            }
        }
        for entry in set.fcm {
            lines.append("fcm \(entry.name): project \(entry.projectID), service account \(entry.clientEmail)")
        }
        return lines
    }
}
