import Foundation

/// Why the store failed.
public enum StoreError: Error, Sendable, CustomStringConvertible, Equatable {
    /// A local file operation failed.
    case io(path: String, reason: String)
    /// The object store could not be reached or did not answer in time.
    case unavailable(endpoint: String, reason: String)
    /// The object store answered with an error (`code` is S3's, e.g. `NoSuchBucket`).
    case s3(endpoint: String, bucket: String, what: String, status: Int, code: String, message: String?)
    /// The store location or its settings are not usable.
    case invalidLocation(String)
    /// A file was removed (by retention in another process) just as an entry naming it was
    /// written; the entry was withdrawn.
    case vanished(String)

    public var description: String {
        switch self {
        case let .io(path, reason): "store: \(path): \(reason)"
        case let .unavailable(endpoint, reason): "object store \(endpoint) unreachable: \(reason)"
        case let .s3(endpoint, bucket, what, status, code, message):
            "object store \(endpoint), bucket \"\(bucket)\": \(what) failed with HTTP \(status) \(code)"
                + (message.map { ": \($0)" } ?? "") + Self.hint(code)
        case let .invalidLocation(text): "store: \(text)"
        case let .vanished(name):
            "store: \(name) was removed while an entry naming it was written (retention ran at the same moment); the "
                + "entry was withdrawn"
        }
    }

    private static func hint(_ code: String) -> String {
        switch code {
        case "NoSuchBucket": " (create the bucket first, or check --store)"
        case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Unauthorized":
            " (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or PUSHMEDIA_S3_*, and --s3-region)"
        default: ""
        }
    }
}

/// The two kinds of objects a store holds.
enum StoreArea: Sendable {
    /// `<sha256>.<ext>` files, served to phones.
    case media
    /// `<cache key>.json` cache entries.
    case index
}

/// Raw object operations of one storage backend. `MediaStore` builds content addressing, the
/// cache index, its in-memory LRU and retention on top; nothing else sees a backend. Blocking:
/// call from a `BlockingExecutor`.
protocol StoreBackend: Sendable {
    /// Where the store is, for messages: a directory, or `s3://bucket/prefix at endpoint`.
    var location: String { get }
    /// A local directory on the same file system as the store (when it is local) for work files.
    var workRoot: String { get }
    /// The local file behind a media name, when the backend keeps files locally (served zero-copy).
    func localPath(of name: String) -> String?
    /// Makes the file at `file` (a work file of this process) the media object `name`, atomically:
    /// readers see the whole object or none. The work file may be gone afterwards.
    func putMedia(
        _ name: String, file: String, bytes: Int64, sha256: String, mime: String, deadline: ContinuousClock.Instant?)
        throws(StoreError)
    /// The size and modification time of media object `name`, nil when absent.
    func mediaInfo(_ name: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> ObjectInfo?
    /// A cheap check for every cache hit that a stored file is still whole (no network round trip).
    func looksIntact(_ name: String, bytes: Int64) -> Bool
    /// A cache entry's bytes and the time it was last written or marked used; nil when absent.
    func readEntry(_ key: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> (data: [UInt8], used: Date)?
    /// Writes a cache entry atomically.
    func writeEntry(_ key: String, data: [UInt8], deadline: ContinuousClock.Instant?) throws(StoreError)
    /// Marks a cache entry used now (for retention).
    func touchEntry(_ key: String, data: [UInt8]) throws(StoreError)
    /// Every object of `area`: media by name, entries by `<key>.json`.
    func list(_ area: StoreArea) throws(StoreError) -> [ObjectInfo]
    /// Removes an object (absent is fine).
    func delete(_ area: StoreArea, _ name: String) throws(StoreError)
    /// Checks that the store takes writes (local) or answers with the bucket (S3).
    func checkReady(deadline: ContinuousClock.Instant?) throws(StoreError)
    /// Writes media `name`'s whole bytes to `fd` (blocking; for checking them).
    func read(_ name: String, to fd: Int32) throws(StoreError)
    /// Media `name`'s bytes in `range` (the whole object when nil; only its head when
    /// `bodyless`), streamed as they arrive on `loop`; nil when the backend serves files from
    /// their local path instead. Does not block.
    func stream(_ name: String, range: ClosedRange<Int>?, bodyless: Bool, on loop: TransferLoop) -> ObjectStream?
}
