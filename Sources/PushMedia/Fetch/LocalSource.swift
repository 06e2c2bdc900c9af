import Foundation

/// Local media references (a relative path or a `file:` URL), allowed only in `process` and
/// `batch`, and only when the file resolves (symlinks included) inside the media root.
public enum LocalSource {
    /// Resolves `reference` against `root` and returns the real path of a regular file inside it.
    public static func resolve(_ reference: String, root: String) throws(FetchError) -> String {
        var path = reference
        if reference.lowercased().hasPrefix("file:") {
            guard let url = URL(string: reference), url.isFileURL else { throw .invalidURL("malformed file: URL") }
            path = url.path
        }
        guard !path.isEmpty, !path.contains("\0") else { throw .invalidURL("empty path") }
        guard let realRoot = realPath(root) else { throw .notFound(root) }
        let joined = path.hasPrefix("/") ? path : realRoot + "/" + path
        let lexical = URL(fileURLWithPath: joined).standardizedFileURL.path
        guard lexical.hasPrefix(realRoot.hasSuffix("/") ? realRoot : realRoot + "/") else {
            throw .pathOutsideRoot(path: reference, root: realRoot)
        }
        guard let real = realPath(joined) else { throw .notFound(path) }
        guard real.hasPrefix(realRoot.hasSuffix("/") ? realRoot : realRoot + "/") else {
            throw .pathOutsideRoot(path: reference, root: realRoot)
        }
        var info = stat()
        guard stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw .notFound(path) }
        return real
    }

    /// Copies the file into `destination` (so later stages never race a changing source), up to `maxBytes`.
    public static func copy(_ path: String, to destination: String, maxBytes: Int64) throws(FetchError) -> Int64 {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            throw .localWrite("cannot create \(destination): \(String(cString: strerror(errno)))")
        }
        defer { close(output) }
        var total: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("reading \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            total += Int64(n)
            if total > maxBytes { throw .tooLarge(limit: maxBytes) }
            let failure = buffer.withUnsafeBytes { writeAll(output, UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            guard failure == 0 else {
                throw .localWrite("writing \(destination): \(String(cString: strerror(failure)))")
            }
        }
        return total
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
