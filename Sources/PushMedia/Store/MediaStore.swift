import CPushMediaShim
import Crypto
import Foundation

/// The content-addressed store of attachments and the cache index, on one of two backends: a
/// local directory (the default) or an S3-compatible bucket (`s3://bucket/prefix`). Media are
/// named `<sha256>.<ext>` and written whole or not at all; a cache entry is written only after
/// every file it names. Entries read or written are kept in an in-memory LRU, so a cache hit
/// costs no round trip; a miss in memory costs one read of the index.
///
/// Work files (downloads, intermediates) live under `<work root>/.incoming/<pid>-<id>/`;
/// folders of processes that are gone (crashed or killed) are removed when a store opens.
/// Blocking: call from a `BlockingExecutor`, except where a method says it is cheap.
public final class MediaStore: Sendable {
    let backend: any StoreBackend
    private let incoming: String
    /// This process's work folder under `.incoming/`.
    let workspace: String

    /// Free bytes on the disk that downloads and intermediates are written to (nil when it
    /// cannot be read). Cheap.
    public var freeWorkSpace: Int64? {
        var info = statvfs()
        guard statvfs(workspace, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
    private let entries: EntryCache
    /// How often the use of an entry is written down for retention (per entry, per process).
    let useInterval: Duration
    /// How long an entry held in memory is used before the index is read again.
    let memoryTTL: Duration
    /// Runs those writes off the request path.
    private let background: BlockingExecutor
    /// What the entries' freshness and the memory's times are read against.
    let clock: WallClock

    /// Opens (and creates) a local store at `directory`.
    public convenience init(directory: String, clock: WallClock = .system) throws(StoreError) {
        try self.init(backend: LocalBackend(directory: directory), clock: clock)
    }

    /// Opens the store `config` names (`--store`): a directory, or `s3://bucket[/prefix]` with
    /// the `--s3-*` settings; `background` writes down the use of entries (the process's
    /// `ProcessResources.store`; threads of its own when not given). Opening an S3 store makes no
    /// request; see `checkReady`.
    public convenience init(
        config: PushMediaConfig, background: BlockingExecutor? = nil, clock: WallClock = .system
    ) throws(StoreError) {
        switch try StoreLocation(config.storeLocation) {
        case let .directory(path):
            try self.init(
                backend: LocalBackend(directory: path), entryCapacity: config.indexCacheEntries,
                memoryTTL: config.indexCacheTTL, background: background, clock: clock)
        case let .s3(bucket, prefix):
            let settings = try config.s3Settings(bucket: bucket, prefix: prefix)
            let client = S3Client(settings: settings, connectTimeout: config.connectTimeout)
            try self.init(
                backend: S3Backend(client: client, workRoot: config.workDirectory),
                entryCapacity: config.indexCacheEntries,
                memoryTTL: config.indexCacheTTL, background: background, clock: clock)
        }
    }

    init(
        backend: any StoreBackend, entryCapacity: Int = 100_000, useInterval: Duration = .seconds(3600),
        memoryTTL: Duration = .seconds(60), background: BlockingExecutor? = nil, clock: WallClock = .system
    ) throws(StoreError) {
        self.background = background ?? BlockingExecutor(name: "pushmedia-store", maxThreads: 2)
        self.backend = backend
        self.memoryTTL = memoryTTL
        self.clock = clock
        incoming = backend.workRoot + "/.incoming"
        workspace = incoming + "/\(getpid())-" + UUID().uuidString.prefix(8).lowercased()
        entries = EntryCache(capacity: entryCapacity)
        self.useInterval = useInterval
        for path in [incoming, workspace] {
            try makeDirectories(path)
        }
        removeAbandonedWorkspaces()
    }

    deinit {
        try? FileManager.default.removeItem(atPath: workspace)
    }

    /// Where the store is, for messages and reports: its directory, or `s3://bucket/prefix at endpoint`.
    public var location: String { backend.location }

    /// The directory of a local store; nil for an object store.
    public var directory: String? { (backend as? LocalBackend)?.directory }

    /// Whether `name` looks like a store file name (`<64 hex>.<ext>`); nothing else is ever served.
    public static func isValidName(_ name: String) -> Bool {
        // Bytes, not Characters: this runs on every cache hit and every /media request.
        let bytes = Array(name.utf8)
        guard bytes.count >= 66, bytes.count <= 70, bytes[64] == UInt8(ascii: ".") else { return false }
        let isHex = { (b: UInt8) in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(b)
        }
        let isExtension = { (b: UInt8) in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
        }
        return bytes[..<64].allSatisfy(isHex) && bytes[65...].allSatisfy(isExtension)
    }

    /// The local file behind a stored name when the store is a local directory (served zero-copy);
    /// nil for an object store (see `read`).
    public func localPath(of name: String) -> String? { Self.isValidName(name) ? backend.localPath(of: name) : nil }

    /// The size of a stored file, nil when absent.
    public func size(of name: String, deadline: ContinuousClock.Instant? = nil) throws(StoreError) -> Int64? {
        guard Self.isValidName(name) else { return nil }
        return try backend.mediaInfo(name, deadline: deadline)?.bytes
    }

    /// Stored file `name`'s bytes in `range` (the whole file when nil; only its head when
    /// `bodyless`) from an object store, streamed as they arrive on `loop`: the request has
    /// started; read its head, then its body. Nil for a local store (serve `localPath(of:)`) or
    /// an invalid name. Does not block.
    public func stream(_ name: String, range: ClosedRange<Int>?, bodyless: Bool = false, on loop: TransferLoop)
        -> ObjectStream?
    {
        Self.isValidName(name) ? backend.stream(name, range: range, bodyless: bodyless, on: loop) : nil
    }

    /// Cheap (no network round trip): whether a stored file is still whole as far as can be seen
    /// locally (a local file's size matches).
    public func looksIntact(_ name: String, bytes: Int64) -> Bool {
        Self.isValidName(name) && backend.looksIntact(name, bytes: bytes)
    }

    /// A fresh path in this process's work folder.
    public func temporaryPath() -> String { workspace + "/" + UUID().uuidString.lowercased() + ".part" }

    /// Stores `bytes` under their hash (taken from memory: the file is never read back).
    public func put(
        _ bytes: [UInt8], format: MediaFormat, width: Int? = nil, height: Int? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) throws(StoreError) -> StoredFile {
        let temporary = temporaryPath()
        let sha256 = bytes.withUnsafeBytes { Self.sha256($0) }
        try Self.write(bytes, to: temporary)
        defer { unlink(temporary) }
        return try adopt(
            temporary, format: format, width: width, height: height, sha256: sha256, deadline: deadline)
    }

    /// Writes `bytes` to a new file at `path` (mode 0644), in one piece where the system allows.
    private static func write(_ bytes: [UInt8], to path: String) throws(StoreError) {
        func reason(_ code: Int32) -> String {
            code == ENOSPC ? "no space left on device" : String(cString: strerror(code))
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .io(path: path, reason: reason(errno)) }
        var failure = bytes.withUnsafeBytes { writeAll(fd, $0) }
        if close(fd) != 0 && failure == 0 { failure = errno }
        guard failure == 0 else {
            unlink(path)
            throw .io(path: path, reason: reason(failure))
        }
    }

    /// Stores the work file at `temporary` under its hash, byte for byte (moved when the store
    /// is local, uploaded otherwise). `sha256`: the file's hash when the caller has it already.
    public func adopt(
        _ temporary: String, format: MediaFormat, width: Int? = nil, height: Int? = nil, sha256 known: String? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) throws(StoreError) -> StoredFile {
        let sha256: String
        if let known { sha256 = known } else { sha256 = try Self.sha256(file: temporary) }
        var info = stat()
        guard stat(temporary, &info) == 0 else { throw .io(path: temporary, reason: String(cString: strerror(errno))) }
        let name = sha256 + "." + format.fileExtension
        try backend.putMedia(
            name, file: temporary, bytes: Int64(info.st_size), sha256: sha256, mime: format.mime, deadline: deadline)
        return StoredFile(
            name: name, mime: format.mime, uti: format.uti, bytes: Int64(info.st_size), width: width, height: height)
    }

    // MARK: Cache index

    /// The cached entry for `key`: from memory, else read from the index (one read). Blocking.
    /// With `fromIndex`, memory is skipped (to see what another node recorded since).
    /// - Throws: `StoreError` when the index cannot be read (the store is unreachable).
    public func lookup(key: String, fromIndex: Bool = false, deadline: ContinuousClock.Instant? = nil)
        throws(StoreError) -> CacheEntry?
    {
        if !fromIndex, let entry = remembered(key: key) { return entry }
        guard let (data, used) = try backend.readEntry(key, deadline: deadline),
            let entry = try? JSONDecoder().decode(CacheEntry.self, from: Data(data)),
            entry.pipeline == PushMediaVersion.pipeline, isIntact(entry)
        else { return nil }
        entries.insert(key, entry: entry, used: used, loaded: clock.now)
        return entry
    }

    /// How often a remembered entry's files are checked (one `stat` each) before it is answered
    /// from memory: a file removed behind the store's back is noticed within this time.
    public static let checkEvery: Duration = .milliseconds(250)

    /// The entry for `key` if this process has it in memory and its files looked whole at their
    /// last check, which is made again once `checkEvery` has passed (hits meanwhile, including
    /// those while it runs, take the entry as it was). Cheap enough for any thread: no round
    /// trip. Marks the entry used (written down at most once per `useInterval`, off this thread).
    public func remembered(key: String) -> CacheEntry? {
        guard
            let (entry, due, check) = entries.hit(
                key, now: clock.now, interval: useInterval, maxAge: memoryTTL, checkEvery: Self.checkEvery)
        else { return nil }
        guard !check || isIntact(entry) else {
            entries.remove(key)
            return nil
        }
        if due { recordUse(key, entry) }
        return entry
    }

    private func isIntact(_ entry: CacheEntry) -> Bool {
        entry.files.allSatisfy { backend.looksIntact($0.name, bytes: $0.bytes) }
    }

    private func recordUse(_ key: String, _ entry: CacheEntry) {
        let backend = self.backend
        guard let data = try? Self.encode(entry) else { return }
        Task.detached { [background] in await background.run { try? backend.touchEntry(key, data: data) } }
    }

    /// Records `entry` for `key` (after its files are stored), then checks that its files are
    /// still there: retention in another process may have removed one that was stored again just
    /// as it checked. Then the entry is withdrawn and `.vanished` thrown, so that no entry names a
    /// missing file (see `collectGarbage`).
    public func record(_ entry: CacheEntry, key: String, deadline: ContinuousClock.Instant? = nil) throws(StoreError) {
        let data: [UInt8]
        do { data = try Self.encode(entry) } catch { throw .io(path: key, reason: "cannot encode entry") }
        try backend.writeEntry(key, data: data, deadline: deadline)
        for file in entry.files where try backend.mediaInfo(file.name, deadline: deadline) == nil {
            try? backend.delete(.index, key + ".json")
            throw .vanished(file.name)
        }
        let now = clock.now
        entries.insert(key, entry: entry, used: now, loaded: now)
    }

    /// Forgets `key` in this process's memory (the index is unchanged).
    public func forget(key: String) { entries.remove(key) }

    /// Removes the index entries of `keys` (here and in memory); the next request for them
    /// fetches and processes again. Other processes notice within their `memoryTTL`. The media
    /// stay until retention finds them unreferenced. Returns the keys that had an entry. Blocking.
    /// Removes every entry made from `sourceID`'s source, whatever options made it, by reading
    /// the whole index (an entry that does not record its source is passed over): the keys removed.
    public func purge(sourceID: String, deadline: ContinuousClock.Instant? = nil) throws(StoreError) -> [String] {
        var purged: [String] = []
        for object in try backend.list(.index) where object.name.hasSuffix(".json") {
            let key = String(object.name.dropLast(".json".count))
            guard let (data, _) = try backend.readEntry(key, deadline: deadline),
                let entry = try? JSONDecoder().decode(CacheEntry.self, from: Data(data)), entry.sourceID == sourceID
            else { continue }
            entries.remove(key)
            try backend.delete(.index, object.name)
            purged.append(key)
        }
        return purged
    }

    public func purge(keys: [String], deadline: ContinuousClock.Instant? = nil) throws(StoreError) -> [String] {
        var purged: [String] = []
        for key in keys {
            entries.remove(key)
            guard try backend.readEntry(key, deadline: deadline) != nil else { continue }
            try backend.delete(.index, key + ".json")
            purged.append(key)
        }
        return purged
    }

    static func encode(_ entry: CacheEntry) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return [UInt8](try encoder.encode(entry))
    }

    /// SHA-256 (lowercase hex) of bytes in memory.
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> String {
        hex(SHA256.hash(data: bytes))
    }

    /// SHA-256 (lowercase hex) of a file's content, read in 1 MiB blocks. Blocking.
    public static func sha256(file path: String) throws(StoreError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var hasher = SHA256()
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { block.deallocate() }
        while true {
            let count = readBlock(fd, into: block)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(path: path, reason: String(cString: strerror(errno)))
            }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: block[..<count]))
        }
        return hex(hasher.finalize())
    }

    /// The key under which a source's result is cached: source identity, options and pipeline version.
    /// What an entry records of its source (`CacheEntry.sourceID`): a digest of its identity,
    /// which a URL's query (a signature, a token) is not readable from.
    public static func sourceID(_ source: String) -> String {
        var text = "pushmedia/source\n\(source)"
        return hex(text.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) })
    }

    public static func cacheKey(source: String, options: String) -> String {
        var text = "pushmedia/\(PushMediaVersion.pipeline)\n\(source)\n\(options)"
        return hex(text.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) })
    }

    /// Lowercase hex of a digest.
    static func hex(_ digest: SHA256.Digest) -> String {
        String(unsafeUninitializedCapacity: SHA256.Digest.byteCount * 2) { text in
            var index = 0
            for byte in digest {
                text[index] = lowercaseHexDigits[Int(byte >> 4)]
                text[index + 1] = lowercaseHexDigits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }

    // MARK: Health and work files

    /// Checks that the store works: the work folder takes a file, and the store takes writes
    /// (local) or answers with its bucket (S3). Blocking.
    public func checkReady(deadline: ContinuousClock.Instant? = nil) throws(StoreError) {
        let probe = temporaryPath()
        guard FileManager.default.createFile(atPath: probe, contents: Data("ready".utf8)) else {
            throw .io(path: workspace, reason: "work folder not writable")
        }
        unlink(probe)
        try backend.checkReady(deadline: deadline)
    }

    /// Removes the work folders of processes that no longer run (a crash or `kill -9` leaves
    /// half-written downloads there; they were never visible under a final name).
    public func removeAbandonedWorkspaces() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: incoming) else { return }
        for name in names where incoming + "/" + name != workspace {
            let pid = name.split(separator: "-").first.flatMap { Int32($0) }
            if let pid, kill(pid, 0) == 0 || errno == EPERM { continue }  // still running
            try? FileManager.default.removeItem(atPath: incoming + "/" + name)
        }
    }
}

/// `read(2)` into `buffer` (a global function: inside `MediaStore`, `read` names its method).
private func readBlock(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
    read(fd, buffer.baseAddress, buffer.count)
}
