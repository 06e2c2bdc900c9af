import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The origin's socket helpers: the listener, reads and writes with their timeouts, a graceful
/// close, and the bytes of a response's head.
extension TestOrigin.Core {
    #if os(Linux)
        static let streamType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
        static let streamType = SOCK_STREAM
        static let sendFlags: Int32 = 0
    #endif

    static func openListener() throws -> (Int32, Int) {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw TestOrigin.SetupError(call: "socket", code: errno) }
        var ready = false
        defer { if !ready { _ = close(fd) } }

        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        guard setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) == 0 else {
            throw TestOrigin.SetupError(call: "setsockopt(SO_REUSEADDR)", code: errno)
        }
        #if !os(Linux)
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, size)
        #endif

        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw TestOrigin.SetupError(call: "bind", code: errno) }
        guard listen(fd, 128) == 0 else { throw TestOrigin.SetupError(call: "listen", code: errno) }
        let named = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw TestOrigin.SetupError(call: "getsockname", code: errno) }
        ready = true
        return (fd, Int(UInt16(bigEndian: addr.sin_port)))
    }

    static func acceptConnection(_ listener: Int32) -> Int32 {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return fd }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // don't leak into processes a test spawns
        #if !os(Linux)
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    static func setTimeout(_ fd: Int32, _ option: Int32, milliseconds: Int) {
        var tv = timeval(tv_sec: milliseconds / 1000, tv_usec: .init(milliseconds % 1000 * 1000))
        _ = setsockopt(fd, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Reads up to and including the blank line ending the request head.
    /// nil: the peer closed or failed first; `.some(nil)`: the head exceeds 64 KiB.
    static func readHead(_ fd: Int32) -> [UInt8]?? {
        let limit = 64 * 1024
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            let scanFrom = max(0, buffer.count - 3)
            buffer.append(contentsOf: chunk[0..<n])
            if buffer.count >= 4 {
                for i in scanFrom...(buffer.count - 4)
                where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                    return .some(Array(buffer[0..<(i + 4)]))
                }
            }
            if buffer.count >= limit { return .some(nil) }
        }
    }

    /// Sends every byte (no SIGPIPE; retries EINTR and send timeouts until stopped);
    /// false if the peer is gone or the server stopped.
    func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Self.sendFlags)
                if n > 0 {
                    offset += n
                    continue
                }
                let err = errno
                if n < 0 && (err == EINTR || err == EAGAIN || err == EWOULDBLOCK) && !isStopped { continue }
                return false
            }
            return true
        }
    }

    /// Half-closes, then drains what the client still sends (≤ 1 s) so closing does
    /// not reset the connection before the client has read the response.
    static func closeGracefully(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
        setTimeout(fd, SO_RCVTIMEO, milliseconds: 1000)
        var scratch = [UInt8](repeating: 0, count: 4096)
        var drained = 0
        while drained < 1 << 20 {
            let n = recv(fd, &scratch, scratch.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            drained += n
        }
    }

    // MARK: HTTP helpers

    /// The path of a request target (origin or absolute form), without query or fragment.
    static func path(of target: String) -> String {
        var rest = Substring(target)
        if !rest.hasPrefix("/"), let scheme = rest.range(of: "://") {
            rest = rest[scheme.upperBound...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        return rest.isEmpty ? "/" : String(rest)
    }

    static func head(_ code: Int, _ fields: [(String, String)], addClose: Bool = true) -> [UInt8] {
        var text = "HTTP/1.1 \(code) \(reason(code))\r\n"
        for (name, value) in fields { text += "\(name): \(value)\r\n" }
        if addClose { text += "Connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    static func simple(_ code: Int, _ body: String, includeBody: Bool) -> [UInt8] {
        let bytes = Array(body.utf8)
        let fields = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(bytes.count)")]
        return head(code, fields) + (includeBody ? bytes : [])
    }

    static func reason(_ code: Int) -> String {
        switch code {
        case 200: "OK"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status"
        }
    }
}
