import Foundation

/// Why the notification goes out without the attachment (or with the thumbnail instead). Every
/// case names what failed and where.
public enum NSEError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The payload has no media URL at any known key.
    case noMedia
    /// The server could not make an attachment; `reason` is its reason (`http_404`, `too_large`…).
    case rejectedByServer(reason: String?)
    /// The `pushmedia` descriptor is malformed: `field` and what is wrong with it.
    case invalidDescriptor(field: String, problem: String)
    /// The media URL at `key` is not an absolute http(s) URL.
    case invalidURL(key: String, value: String)
    /// The attachment is of a type the phone does not show as an attachment.
    case unsupportedType(String)
    /// The server answered with `status` instead of 200.
    case http(status: Int, url: String)
    /// The answer is not of the type the descriptor promises (`found` is its Content-Type or what
    /// its first bytes are).
    case wrongType(url: String, expected: String, found: String)
    /// The file is over `limit` bytes (Apple's cap for its kind, or the descriptor's size).
    case tooLarge(url: String, limit: Int64)
    /// The connection closed after `received` of `expected` bytes.
    case truncated(url: String, received: Int64, expected: Int64)
    /// The download did not finish within `seconds`.
    case timeout(url: String, seconds: Double)
    /// The system's time for the extension ran out first.
    case expired
    /// DNS, connection, TLS or redirect failure.
    case transport(url: String, message: String)
    /// The downloaded file could not be written or moved.
    case file(path: String, message: String)
    /// `UNNotificationAttachment` refused the file.
    case attachment(message: String)

    public var description: String {
        switch self {
        case .noMedia:
            "no media URL in the payload (looked at the pushmedia descriptor's items and "
                + "\(MediaURLLocator.keysDescription))"
        case let .rejectedByServer(reason):
            "PushMedia rejected the media on the server (\(reason ?? "no reason given")): the text is shown without it"
        case let .invalidDescriptor(field, problem):
            "invalid pushmedia descriptor: \(field) \(problem)"
        case let .invalidURL(key, value):
            "media URL at \(key) is not an absolute http(s) URL: \(value.prefix(200))"
        case let .unsupportedType(type):
            "\(type) is not an attachment type the phone shows (JPEG, PNG, GIF, MP3, M4A, WAV, AIFF, MPEG, MP4, AVI)"
        case let .http(status, url):
            "\(url) answered HTTP \(status)"
        case let .wrongType(url, expected, found):
            "\(url) is \(found), not the \(expected) the descriptor promises"
        case let .tooLarge(url, limit):
            "\(url) is over \(limit) bytes"
        case let .truncated(url, received, expected):
            "\(url) ended after \(received) of \(expected) bytes"
        case let .timeout(url, seconds):
            "\(url) did not arrive within \(String(format: "%.1f", seconds)) s"
        case .expired:
            "the extension's time ran out before the attachment arrived"
        case let .transport(url, message):
            "\(url) could not be downloaded: \(message)"
        case let .file(path, message):
            "could not write \(path): \(message)"
        case let .attachment(message):
            "the attachment was refused: \(message)"
        }
    }
}
