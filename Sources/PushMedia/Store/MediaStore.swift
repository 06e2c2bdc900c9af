import CPushMediaShim
import Foundation

/// A file in the store, named `<sha256>.<ext>` after its content and sniffed type.
public struct StoredFile: Codable, Sendable, Equatable {
    public var name: String
    public var mime: String
    public var uti: String?
    public var bytes: Int64
    public var width: Int?
    public var height: Int?
}

/// A cached result: what the pipeline made of one source under one set of options.
public struct CacheEntry: Codable, Sendable, Equatable {
    /// `processed` or `passthrough`.
    public var status: String
    public var attachment: StoredFile
    public var thumbnail: StoredFile?
    public var sourceMIME: String
    public var sourceBytes: Int64
    public var pipeline: Int
    /// The profile's square icon (Web Push).
    public var icon: StoredFile?
    /// The thumbnail clipping rectangle computed for `--thumb-aspect`.
    public var clip: ClipRect?
    /// For an animation, the frame to show as its thumbnail.
    public var frame: Int?

    public init(status: String, attachment: StoredFile, thumbnail: StoredFile?, sourceMIME: String, sourceBytes: Int64, pipeline: Int,
                icon: StoredFile? = nil, clip: ClipRect? = nil, frame: Int? = nil) {
        self.status = status
        self.attachment = attachment
        self.thumbnail = thumbnail
        self.sourceMIME = sourceMIME
        self.sourceBytes = sourceBytes
        self.pipeline = pipeline
        self.icon = icon
        self.clip = clip
        self.frame = frame
    }

    enum CodingKeys: String, CodingKey {
        case status, attachment, thumbnail, pipeline, icon, clip, frame
        case sourceMIME = "source_mime", sourceBytes = "source_bytes"
    }
}

/// Why the store failed.
public enum StoreError: Error, Sendable, CustomStringConvertible {
    case io(path: String, reason: String)
    public var description: String {
        switch self { case let .io(path, reason): "store: \(path): \(reason)" }
    }
}

/// The content-addressed local store. Layout of `directory`:
/// - `<sha256>.<ext>`: media, written to `.incoming/` first and renamed into place, so a
///   half-written file is never visible under its final name;
/// - `.index/<sha256 of cache key>.json`: cache entries, written the same way;
/// - `.incoming/<pid>-<id>/`: downloads and temporary files of one process; folders of processes
///   that are gone (crashed or killed) are removed when a store opens.
/// Blocking: call from a `BlockingExecutor`.
public final class MediaStore: Sendable {
    public let directory: String
    private var incoming: String { directory + "/.incoming" }
    /// This process's temporary folder under `.incoming/`.
    private let workspace: String
    /// Entries read or written by this process, so that a cache hit costs no file read.
    private let remembered = Locked<[String: CacheEntry]>([:])
    private static let rememberedLimit = 100_000
    private var index: String { directory + "/.index" }

    /// Opens (and creates) the store at `directory`.
    public init(directory: String) throws(StoreError) {
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        let root = URL(fileURLWithPath: absolute).standardizedFileURL.path
        self.directory = root
        workspace = root + "/.incoming/\(getpid())-" + UUID().uuidString.prefix(8).lowercased()
        for path in [root, root + "/.incoming", root + "/.index", workspace] {
            do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
                throw .io(path: path, reason: "cannot create directory (\(error.localizedDescription))")
            }
        }
        guard access(self.directory, W_OK) == 0 else { throw .io(path: self.directory, reason: "not writable") }
        removeAbandonedWorkspaces()
    }

    deinit {
        try? FileManager.default.removeItem(atPath: workspace)
    }

    /// Whether `name` looks like a store file name (`<64 hex>.<ext>`); nothing else is ever served.
    public static func isValidName(_ name: String) -> Bool {
        // Bytes, not Characters: this runs on every cache hit and every /media request.
        let bytes = Array(name.utf8)
        guard bytes.count >= 66, bytes.count <= 70, bytes[64] == UInt8(ascii: ".") else { return false }
        let isHex = { (b: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(b) }
        let isExtension = { (b: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) }
        return bytes[..<64].allSatisfy(isHex) && bytes[65...].allSatisfy(isExtension)
    }

    /// The path of a stored file.
    public func path(of name: String) -> String { directory + "/" + name }

    /// Whether a stored file exists.
    public func contains(_ name: String) -> Bool { Self.isValidName(name) && access(path(of: name), F_OK) == 0 }

    /// A fresh path under `.incoming/` for a download.
    public func temporaryPath() -> String { workspace + "/" + UUID().uuidString.lowercased() + ".part" }

    /// Stores `bytes` under their hash.
    public func put(_ bytes: [UInt8], format: MediaFormat, width: Int? = nil, height: Int? = nil) throws(StoreError) -> StoredFile {
        var hex = [CChar](repeating: 0, count: 65)
        bytes.withUnsafeBytes { pm_sha256_buffer($0.baseAddress, $0.count, &hex) }
        let name = String(cBuffer: hex) + "." + format.fileExtension
        if !contains(name) {
            try writeAtomically(Data(bytes), to: path(of: name))
        }
        return StoredFile(name: name, mime: format.mime, uti: format.uti, bytes: Int64(bytes.count), width: width, height: height)
    }

    /// Moves the file at `temporary` (under `.incoming/`) into the store under its hash, byte for byte.
    public func adopt(_ temporary: String, format: MediaFormat, width: Int? = nil, height: Int? = nil) throws(StoreError) -> StoredFile {
        var hex = [CChar](repeating: 0, count: 65)
        let status = pm_sha256_file(temporary, &hex)
        guard status == 0 else { throw .io(path: temporary, reason: String(cString: strerror(status))) }
        var info = stat()
        guard stat(temporary, &info) == 0 else { throw .io(path: temporary, reason: String(cString: strerror(errno))) }
        let name = String(cBuffer: hex) + "." + format.fileExtension
        chmod(temporary, 0o644)
        guard rename(temporary, path(of: name)) == 0 else { throw .io(path: path(of: name), reason: String(cString: strerror(errno))) }
        return StoredFile(name: name, mime: format.mime, uti: format.uti, bytes: Int64(info.st_size), width: width, height: height)
    }

    /// The cached entry for `key`, if every file it names is still present. Blocking (reads the index).
    public func lookup(key: String) -> CacheEntry? {
        if let entry = remembered(key: key) { return entry }
        guard let data = FileManager.default.contents(atPath: indexPath(key)),
              let entry = try? JSONDecoder().decode(CacheEntry.self, from: data),
              entry.pipeline == PushMediaVersion.pipeline, isPresent(entry) else { return nil }
        remember(entry, key: key)
        return entry
    }

    /// The entry for `key` if this process has seen it and its files are still present. Cheap
    /// enough for any thread: no file is read.
    public func remembered(key: String) -> CacheEntry? {
        guard let entry = remembered.withLock({ $0[key] }) else { return nil }
        guard isPresent(entry) else {
            remembered.withLock { _ = $0.removeValue(forKey: key) }
            return nil
        }
        return entry
    }

    private func isPresent(_ entry: CacheEntry) -> Bool {
        contains(entry.attachment.name) && (entry.thumbnail.map { contains($0.name) } ?? true) && (entry.icon.map { contains($0.name) } ?? true)
    }

    private func remember(_ entry: CacheEntry, key: String) {
        remembered.withLock { entries in
            if entries.count >= Self.rememberedLimit { entries.removeAll(keepingCapacity: true) }
            entries[key] = entry
        }
    }

    /// Records `entry` for `key`.
    public func record(_ entry: CacheEntry, key: String) throws(StoreError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(entry) else { throw .io(path: indexPath(key), reason: "cannot encode entry") }
        try writeAtomically(data, to: indexPath(key))
        remember(entry, key: key)
    }

    /// The key under which a source's result is cached: source identity, options and pipeline version.
    public static func cacheKey(source: String, options: String) -> String {
        var hex = [CChar](repeating: 0, count: 65)
        let text = Array("pushmedia/\(PushMediaVersion.pipeline)\n\(source)\n\(options)".utf8)
        text.withUnsafeBytes { pm_sha256_buffer($0.baseAddress, $0.count, &hex) }
        return String(cBuffer: hex)
    }

    private func indexPath(_ key: String) -> String { index + "/" + key + ".json" }

    /// Writes `data` to a temporary file beside nothing visible, then renames it to `path`.
    func writeAtomically(_ data: Data, to path: String) throws(StoreError) {
        let temporary = temporaryPath()
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o644]) else {
            throw .io(path: temporary, reason: "cannot write")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .io(path: path, reason: reason)
        }
    }

    /// Removes the temporary folders of processes that no longer run (a crash or `kill -9`
    /// leaves half-written downloads there; they were never visible under a final name).
    public func removeAbandonedWorkspaces() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: incoming) else { return }
        for name in names where incoming + "/" + name != workspace {
            let pid = name.split(separator: "-").first.flatMap { Int32($0) }
            if let pid, kill(pid, 0) == 0 || errno == EPERM { continue }  // still running
            try? FileManager.default.removeItem(atPath: incoming + "/" + name)
        }
    }

    /// Temporary files of this process currently present (for checks and tests).
    public func temporaryFiles() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: workspace)) ?? []
    }
}
