import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Makes `path` and its missing parents (`mkdir -p`). A failure names the directory that could
/// not be made and why, in the system's words: `/srv/media is not a directory`, `permission
/// denied`, `no such file or directory` (under /proc).
func makeDirectories(_ path: String) throws(StoreError) {
    let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var current = ""
    for part in absolute.split(separator: "/") where !part.isEmpty {
        current += "/" + part
        if mkdir(current, 0o755) == 0 { continue }
        let code = errno
        var info = stat()
        if code == EEXIST, stat(current, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR { continue }
            throw .io(path: path, reason: "cannot create directory: \(current) is a file, not a directory")
        }
        throw .io(
            path: path, reason: "cannot create directory \(current): \(String(cString: strerror(code)).lowercased())")
    }
}
