import Foundation

/// The local directory backend (the default). Layout of `directory`:
/// - `<sha256>.<ext>`: media, renamed into place from `.incoming/`, so a half-written file is
///   never visible under its final name;
/// - `.index/<cache key>.json`: cache entries, written the same way; an entry's modification
///   time is when it was last used (retention reads it);
/// - `.incoming/<pid>-<id>/`: work files of one process (see `MediaStore`).
final class LocalBackend: StoreBackend {
    let directory: String
    private var index: String { directory + "/.index" }

    init(directory: String) throws(StoreError) {
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        let root = URL(fileURLWithPath: absolute).standardizedFileURL.path
        self.directory = root
        for path in [root, root + "/.index"] {
            try makeDirectories(path)
        }
        guard access(root, W_OK) == 0 else { throw .io(path: root, reason: "not writable") }
    }

    var location: String { directory }
    var workRoot: String { directory }

    func localPath(of name: String) -> String? { directory + "/" + name }

    private func indexPath(_ key: String) -> String { index + "/" + key + ".json" }

    func putMedia(
        _ name: String, file: String, bytes: Int64, sha256: String, mime: String, deadline: ContinuousClock.Instant?
    ) throws(StoreError) {
        // Renaming over an existing copy (same bytes) also renews its modification time, which
        // retention reads: a file a new entry is about to reference is never "old".
        chmod(file, 0o644)
        guard rename(file, directory + "/" + name) == 0 else {
            throw .io(path: directory + "/" + name, reason: String(cString: strerror(errno)))
        }
    }

    func mediaInfo(_ name: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> ObjectInfo? {
        var info = stat()
        guard stat(directory + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return ObjectInfo(
            name: name, bytes: Int64(info.st_size),
            modified: Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
    }

    func looksIntact(_ name: String, bytes: Int64) -> Bool {
        var info = stat()
        return stat(directory + "/" + name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
            && Int64(info.st_size) == bytes
    }

    func readEntry(_ key: String, deadline: ContinuousClock.Instant?) throws(StoreError) -> (data: [UInt8], used: Date)?
    {
        let path = indexPath(key)
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else { return nil }
        return ([UInt8](data), Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
    }

    func writeEntry(_ key: String, data: [UInt8], deadline: ContinuousClock.Instant?) throws(StoreError) {
        let temporary = index + "/.\(key).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(data), attributes: [.posixPermissions: 0o644])
        else {
            throw .io(path: indexPath(key), reason: errno == ENOSPC ? "no space left on device" : "cannot write")
        }
        guard rename(temporary, indexPath(key)) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw .io(path: indexPath(key), reason: reason)
        }
    }

    func touchEntry(_ key: String, data: [UInt8]) throws(StoreError) {
        guard utimes(indexPath(key), nil) == 0 else {
            throw .io(path: indexPath(key), reason: String(cString: strerror(errno)))
        }
    }

    func list(_ area: StoreArea) throws(StoreError) -> [ObjectInfo] {
        let folder = area == .media ? directory : index
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
            throw .io(path: folder, reason: "cannot list")
        }
        return names.compactMap { name in
            guard area == .media ? MediaStore.isValidName(name) : (name.hasSuffix(".json") && !name.hasPrefix("."))
            else { return nil }
            var info = stat()
            guard stat(folder + "/" + name, &info) == 0 else { return nil }
            return ObjectInfo(
                name: name, bytes: Int64(info.st_size),
                modified: Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
        }
    }

    func delete(_ area: StoreArea, _ name: String) throws(StoreError) {
        let path = (area == .media ? directory : index) + "/" + name
        guard unlink(path) == 0 || errno == ENOENT else {
            throw .io(path: path, reason: String(cString: strerror(errno)))
        }
    }

    func checkReady(deadline: ContinuousClock.Instant?) throws(StoreError) {
        let probe = index + "/.ready.\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        guard FileManager.default.createFile(atPath: probe, contents: Data("ready".utf8)) else {
            throw .io(path: directory, reason: "not writable")
        }
        unlink(probe)
    }

    func read(_ name: String, to fd: Int32) throws(StoreError) {
        throw .io(path: directory + "/" + name, reason: "local files are read from their path")
    }

    /// Local files are served from their path.
    func stream(_ name: String, range: ClosedRange<Int>?, bodyless: Bool, on loop: TransferLoop) -> ObjectStream? {
        nil
    }
}
