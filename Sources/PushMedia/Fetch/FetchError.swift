/// Why media could not be obtained. Each case maps to a machine-readable `reason`.
public enum FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL's scheme is not http or https (or a local path where none is allowed).
    case unsupportedScheme(String)
    /// The reference is not a usable URL.
    case invalidURL(String)
    /// A connection to an internal address was refused (SSRF guard).
    case blockedAddress(String)
    /// The body is larger than the cap (declared or counted while streaming).
    case tooLarge(limit: Int64)
    /// The origin answered with an error status.
    case httpStatus(Int)
    case tooManyRedirects(Int)
    /// Connect or low-speed timeout.
    case timeout(String)
    /// The request's budget ran out.
    case deadlineExceeded
    case cancelled
    case dnsFailure(String)
    case connectionFailed(String)
    /// A local reference resolves outside the allowed directory.
    case pathOutsideRoot(path: String, root: String)
    case notFound(String)
    case io(String)
    /// The fetched bytes could not be written to local disk (full, or over a file size limit):
    /// the store's fault, not the media's.
    case localWrite(String)
    case transfer(code: Int, message: String)

    /// The bytes could not be written locally (`localWrite`).
    public var isLocalWrite: Bool {
        if case .localWrite = self { return true }
        return false
    }

    /// Machine-readable reason for reports and the payload descriptor.
    public var reason: String {
        switch self {
        case .unsupportedScheme: "unsupported_scheme"
        case .invalidURL: "invalid_url"
        case .blockedAddress: "blocked_address"
        case .tooLarge: "too_large"
        case let .httpStatus(code): "http_\(code)"
        case .tooManyRedirects: "too_many_redirects"
        case .timeout: "timeout"
        case .deadlineExceeded: ReasonCode.budgetExceeded
        case .cancelled: "cancelled"
        case .dnsFailure: "dns_failed"
        case .connectionFailed: "connect_failed"
        case .pathOutsideRoot: "path_outside_root"
        case .notFound: "not_found"
        case .io: "io_error"
        case .localWrite: "store_unavailable"
        case .transfer: "fetch_failed"
        }
    }

    public var description: String {
        switch self {
        case let .unsupportedScheme(scheme): "scheme \"\(scheme)\" is not allowed (only http and https)"
        case let .invalidURL(why): "not a usable URL: \(why)"
        case let .blockedAddress(address):
            "connection to internal address \(address) refused (loopback, private, link-local and similar ranges are "
                + "denied; --allow-private-networks permits them)"
        case let .tooLarge(limit): "body exceeds the \(limit)-byte download cap"
        case let .httpStatus(code): "origin answered HTTP \(code)"
        case let .tooManyRedirects(limit): "more than \(limit) redirects"
        case let .timeout(what): "timed out: \(what)"
        case .deadlineExceeded: "time budget ran out"
        case .cancelled: "cancelled"
        case let .dnsFailure(host): "could not resolve host: \(host)"
        case let .connectionFailed(why): "connection failed: \(why)"
        case let .pathOutsideRoot(path, root): "local path \"\(path)\" resolves outside the media root \(root)"
        case let .notFound(path): "no such file: \(path)"
        case let .io(why): "I/O error: \(why)"
        case let .localWrite(why): "cannot write the download to local disk: \(why)"
        case let .transfer(code, message): "transfer failed (libcurl \(code)): \(message)"
        }
    }
}
