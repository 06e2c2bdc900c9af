import Foundation

/// The S3-compatible object store backend. Objects under the bucket's prefix:
/// - `<prefix>/<sha256>.<ext>`: media, with its `Content-Type` and
///   `Cache-Control: public, max-age=31536000, immutable`, ready to be served by the bucket or a CDN;
/// - `<prefix>/index/<cache key>.json`: cache entries (`application/json`), written only after
///   every media object they name exists. An entry's `Last-Modified` is when it was last used.
/// S3 PUT is atomic: an object is visible whole or not at all, so no reader ever sees a partial
/// upload. Work files (downloads, intermediates) stay on local disk under `workRoot`.
final class S3Backend: StoreBackend {
    let client: S3Client
    let workRoot: String

    init(client: S3Client, workRoot: String) throws(StoreError) {
        self.client = client
        // A connection the object store closed must end its transfer with EPIPE, not the process.
        signal(SIGPIPE, SIG_IGN)
        let absolute = workRoot.hasPrefix("/") ? workRoot : FileManager.default.currentDirectoryPath + "/" + workRoot
        self.workRoot = URL(fileURLWithPath: absolute).standardizedFileURL.path
        try makeDirectories(self.workRoot)
    }

    var settings: S3Settings { client.settings }
    var location: String { "\(settings.storeURL) at \(settings.endpoint)" }

    func localPath(of name: String) -> String? { nil }

    private func indexKey(_ key: String) -> String { settings.key("index/" + key + ".json") }

    static let mediaCacheControl = "public, max-age=31536000, immutable"

    func putMedia(
        _ name: String, file: String, bytes: Int64, sha256: String, mime: String, deadline: ContinuousClock.Instant?
    ) throws(StoreError) {
        // Always uploaded, even when the object exists: the PUT renews its Last-Modified, which
        // retention reads, so a file a new entry is about to reference is never "old".
        try client.putObject(
            settings.key(name), body: .file(path: file, bytes: bytes, sha256: sha256), contentType: mime,
            cacheControl: Self.mediaCacheControl, deadline: deadline)
    }

    func mediaInfo(_ name: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> ObjectInfo? {
        try client.headObject(settings.key(name), deadline: deadline).map {
            ObjectInfo(name: name, bytes: $0.bytes, modified: $0.modified ?? .distantPast)
        }
    }

    /// Objects are immutable and uploaded whole; their presence is checked when an entry naming
    /// them is recorded (`MediaStore.record`), not on a cache hit.
    func looksIntact(_ name: String, bytes: Int64) -> Bool { true }

    func readEntry(_ key: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> (data: [UInt8], used: Date)?
    {
        guard let object = try client.getObject(indexKey(key), limit: 1 << 20, deadline: deadline) else { return nil }
        return (object.bytes, object.modified ?? Date())
    }

    func writeEntry(_ key: String, data: [UInt8], deadline: ContinuousClock.Instant?) throws(StoreError) {
        try client.putObject(
            indexKey(key), body: .bytes(data), contentType: "application/json", cacheControl: "no-cache",
            deadline: deadline)
    }

    /// S3 has no "touch": the same bytes are written again, which renews `Last-Modified`.
    func touchEntry(_ key: String, data: [UInt8]) throws(StoreError) {
        try writeEntry(key, data: data, deadline: nil)
    }

    func list(_ area: StoreArea) throws(StoreError) -> [ObjectInfo] {
        let base = settings.prefix.isEmpty ? "" : settings.prefix + "/"
        switch area {
        case .media:
            return try client.list(prefix: base).filter { MediaStore.isValidName($0.name) }
        case .index:
            return try client.list(prefix: base + "index/").filter {
                $0.name.hasSuffix(".json") && !$0.name.contains("/")
            }
        }
    }

    func delete(_ area: StoreArea, _ name: String) throws(StoreError) {
        try client.deleteObject(area == .media ? settings.key(name) : settings.key("index/" + name))
    }

    func checkReady(deadline: ContinuousClock.Instant?) throws(StoreError) {
        try client.checkBucket(deadline: deadline)
    }

    func read(_ name: String, to fd: Int32) throws(StoreError) {
        let response = try client.perform("GET", key: settings.key(name), sink: .descriptor(fd))
        guard response.status == 200 else { throw client.failure(response, "GET \(name)") }
    }

    func stream(_ name: String, range: ClosedRange<Int>?, bodyless: Bool, on loop: TransferLoop) -> ObjectStream? {
        client.stream(settings.key(name), range: range, bodyless: bodyless, on: loop)
    }
}
