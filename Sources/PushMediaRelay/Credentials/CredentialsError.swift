/// Why the relays' credentials cannot be used: the file, or an entry it names. Messages name the
/// file or entry and what to do, and never carry a secret (no key, password or token).
public enum CredentialsError: Error, CustomStringConvertible, Equatable {
    /// The credentials file itself: unreadable, not YAML/JSON, not the expected shape, exposed.
    case file(path: String, problem: String)
    /// One entry (`apns` or `fcm`, its name or position).
    case entry(section: String, name: String, problem: String)
    /// A PKCS#12 file whose encryption (RC2-40, as Keychain exports it) cannot be read.
    case legacyPKCS12(name: String, path: String)
    /// A topic claimed by two APNs entries.
    case duplicateTopic(topic: String, first: String, second: String)
    /// A Firebase project claimed by two FCM entries.
    case duplicateProject(project: String, first: String, second: String)
    /// Several of the above, in the order found.
    case several([CredentialsError])

    public var description: String {
        switch self {
        case let .file(path, problem): "credentials file \(path): \(problem)"
        case let .entry(section, name, problem): "\(section) entry \"\(name)\": \(problem)"
        case let .legacyPKCS12(name, path):
            "apns entry \"\(name)\": \(path) uses PKCS#12 encryption this build cannot read (RC2-40, as Keychain "
                + "exports it); convert it once: openssl pkcs12 -legacy -in \(path) -nodes -out legacy.pem && "
                + "openssl pkcs12 -export -in legacy.pem -out \(path).new -certpbe AES-256-CBC -keypbe AES-256-CBC "
                + "-macalg sha256 (then chmod 600 and point certificate at it; delete legacy.pem)"
        case let .duplicateTopic(topic, first, second):
            "apns topic \(topic) is in two entries, \"\(first)\" and \"\(second)\": a topic picks one credential"
        case let .duplicateProject(project, first, second):
            "fcm project \(project) is in two entries, \"\(first)\" and \"\(second)\""
        case let .several(errors): errors.map(\.description).joined(separator: "\n")
        }
    }

    /// Each problem on its own.
    public var all: [CredentialsError] {
        if case let .several(errors) = self { return errors.flatMap(\.all) }
        return [self]
    }
}
