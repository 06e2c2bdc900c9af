/// An error with a machine-readable reason (`http_404`, `decode_failed`, …) and a message a
/// person can act on.
public protocol ReasonedError: Error, CustomStringConvertible {
    var reason: String { get }
}

extension FetchError: ReasonedError {}
extension TranscodeError: ReasonedError {}
extension StoreError: ReasonedError {
    public var reason: String { "store_failed" }
}
