import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny, real HTTP/1.1 origin server for integration tests.
///
/// Listens on `127.0.0.1` on an ephemeral port. One accept thread, one thread per
/// connection, one request per connection: every response carries `Connection: close`
/// and the socket is closed afterwards. GET and HEAD are served (HEAD sends headers
/// only); other methods get 405, unregistered paths 404. Completely silent.
/// All mutable state is guarded by one lock, so it is safe to use from async tests.
public final class TestOrigin: @unchecked Sendable {
    /// How a registered path answers.
    public enum Behaviour: Sendable {
        /// 200 with `Content-Length`; `contentType` nil sends no `Content-Type` header.
        case file(body: [UInt8], contentType: String?)
        /// The given status (e.g. 404, 500) with a `text/html` body.
        case status(Int, body: String)
        /// A redirect with a `Location` header (absolute URL or path) and an empty body.
        case redirect(to: String, status: Int = 302)
        /// 200 with `Content-Length: total`, then `bytesPerSecond` bytes of 0xFF each
        /// second (the first batch at once) until `total` is sent, the client
        /// disconnects, or `stop()` is called.
        case drip(contentType: String, bytesPerSecond: Int, total: Int)
        /// 200 without `Content-Length`; writes 64 KiB chunks of 0xFF until the client
        /// disconnects or `stop()` is called.
        case endless(contentType: String)
        /// 200 claiming `Content-Length: N` but sending only `body`, then closing.
        case declaredLength(Int, body: [UInt8], contentType: String)
        /// 200 with `Content-Length`, after waiting `delay` before sending anything: a slow origin
        /// that still delivers real bytes.
        case delayed(Duration, body: [UInt8], contentType: String)
        /// Exactly these headers (plus `Connection: close` unless given) and body.
        /// No `Content-Length` is added: without one, the body ends at the close.
        case headers([(String, String)], status: Int, body: [UInt8])
        /// 200 with validators and freshness headers; 304 (no body) when the request's
        /// `If-None-Match` names `etag` or its `If-Modified-Since` equals `lastModified`.
        case cacheable(body: [UInt8], contentType: String, etag: String?, lastModified: String?, cacheControl: String?)
    }

    /// Failure to set up the listening socket.
    struct SetupError: Error, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "TestOrigin: \(call) failed: \(String(cString: strerror(code)))" }
    }

    /// The ephemeral port bound on 127.0.0.1.
    public let port: Int
    private let core: Core

    /// Starts listening on 127.0.0.1:<ephemeral>.
    public init() throws {
        let (fd, port) = try Core.openListener()
        self.port = port
        self.core = Core(listener: fd)
        core.start()
    }

    deinit { core.stop() }

    /// `"http://127.0.0.1:<port>"`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// `baseURL + path`; `path` starts with "/".
    public func url(_ path: String) -> String { baseURL + path }

    /// Registers (or replaces) a route; `path` matches the request path without its query.
    public func route(_ path: String, _ behaviour: Behaviour) {
        core.setRoute(Core.path(of: path), behaviour)
    }

    /// How many requests arrived for `path` (query ignored), counted before responding.
    public func hits(_ path: String) -> Int {
        core.hits(Core.path(of: path))
    }

    /// How many of those were answered 304 Not Modified.
    public func notModified(_ path: String) -> Int {
        core.notModified(Core.path(of: path))
    }

    /// Closes the listener and resets every open connection (in-flight clients see an
    /// error at once), then waits (up to 2 s) for the server threads to finish.
    /// Idempotent; also called from `deinit`.
    public func stop() { core.stop() }
}

extension TestOrigin {
    /// Shared state and server threads. Threads retain this, not the `TestOrigin`,
    /// so dropping the last `TestOrigin` reference still stops the server.
    fileprivate final class Core: @unchecked Sendable {
        private let cond = NSCondition()  // guards everything below
        private let listener: Int32
        private var listenerOpen = true
        private var stopped = false
        private var routes: [String: Behaviour] = [:]
        private var hitCounts: [String: Int] = [:]
        private var notModifiedCounts: [String: Int] = [:]
        private var connections: Set<Int32> = []
        private var threads = 0

        init(listener: Int32) { self.listener = listener }

        // MARK: State

        func setRoute(_ path: String, _ behaviour: Behaviour) {
            cond.lock()
            defer { cond.unlock() }
            routes[path] = behaviour
        }

        public func hits(_ path: String) -> Int {
            cond.lock()
            defer { cond.unlock() }
            return hitCounts[path] ?? 0
        }

        func notModified(_ path: String) -> Int {
            cond.lock()
            defer { cond.unlock() }
            return notModifiedCounts[path] ?? 0
        }

        private func countNotModified(_ path: String) {
            cond.lock()
            defer { cond.unlock() }
            notModifiedCounts[path, default: 0] += 1
        }

        private var isStopped: Bool {
            cond.lock()
            defer { cond.unlock() }
            return stopped
        }

        /// Counts the hit and returns the route, atomically.
        private func arrive(_ path: String) -> Behaviour? {
            cond.lock()
            defer { cond.unlock() }
            hitCounts[path, default: 0] += 1
            return routes[path]
        }

        func stop() {
            cond.lock()
            if !stopped {
                stopped = true
                if listenerOpen { _ = shutdown(listener, Int32(SHUT_RDWR)) }
                // Abort in-flight connections: SHUT_RD wakes readers and pollers, senders
                // notice `stopped` within their 100 ms send timeout, and closing with a zero
                // linger sends RST (no FIN, which a client could take for a complete body).
                var abort = linger(l_onoff: 1, l_linger: 0)
                for fd in connections {
                    _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
                    _ = shutdown(fd, Int32(SHUT_RD))
                }
            }
            let deadline = Date().addingTimeInterval(2)
            while threads > 0 && cond.wait(until: deadline) {}
            cond.unlock()
        }

        // MARK: Threads

        func start() {
            cond.lock()
            threads += 1
            cond.unlock()
            let thread = Thread { [self] in acceptLoop() }
            thread.name = "TestOrigin.accept"
            thread.start()
        }

        private func threadDone() {
            cond.lock()
            threads -= 1
            cond.broadcast()
            cond.unlock()
        }

        private func acceptLoop() {
            defer {
                cond.lock()
                listenerOpen = false
                _ = close(listener)
                cond.unlock()
                threadDone()
            }
            while true {
                let fd = Self.acceptConnection(listener)
                if fd < 0 {
                    let err = errno
                    if isStopped { return }
                    switch err {
                    case EINTR, ECONNABORTED, EPROTO: continue
                    case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                        usleep(10_000)
                        continue
                    default: return
                    }
                }
                cond.lock()
                if stopped {
                    cond.unlock()
                    _ = close(fd)
                    return
                }
                connections.insert(fd)
                threads += 1
                cond.unlock()
                let thread = Thread { [self] in serve(fd) }
                thread.name = "TestOrigin.connection"
                thread.start()
            }
        }

        /// Handles one request on `fd`, then closes it.
        private func serve(_ fd: Int32) {
            defer {
                cond.lock()
                connections.remove(fd)
                _ = close(fd)
                cond.unlock()
                threadDone()
            }
            Self.setTimeout(fd, SO_RCVTIMEO, milliseconds: 10_000)
            Self.setTimeout(fd, SO_SNDTIMEO, milliseconds: 100)
            guard let head = Self.readHead(fd) else { return }
            guard let head else {
                _ = sendAll(fd, Self.head(431, [("Content-Length", "0")]))
                return Self.closeGracefully(fd)
            }
            let lineEnd = head.firstIndex { $0 == 13 || $0 == 10 } ?? head.endIndex
            let requestLine = String(decoding: head[..<lineEnd], as: UTF8.self)
            let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count == 3, parts[2].hasPrefix("HTTP/") else {
                _ = sendAll(fd, Self.simple(400, "Bad Request\n", includeBody: true))
                return Self.closeGracefully(fd)
            }
            let method = String(parts[0])
            let path = Self.path(of: String(parts[1]))
            let behaviour = arrive(path)
            guard method == "GET" || method == "HEAD" else {
                _ = sendAll(fd, Self.head(405, [("Allow", "GET, HEAD"), ("Content-Length", "0")]))
                return Self.closeGracefully(fd)
            }
            if case let .cacheable(body, contentType, etag, lastModified, cacheControl)? = behaviour {
                var request: [String: String] = [:]
                for line in String(decoding: head, as: UTF8.self).split(whereSeparator: \.isNewline).dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    request[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                        in: .whitespaces)
                }
                var fields: [(String, String)] = []
                if let etag { fields.append(("ETag", etag)) }
                if let lastModified { fields.append(("Last-Modified", lastModified)) }
                if let cacheControl { fields.append(("Cache-Control", cacheControl)) }
                let matches =
                    (etag != nil && request["if-none-match"] == etag)
                    || (request["if-none-match"] == nil && lastModified != nil
                        && request["if-modified-since"] == lastModified)
                if matches {
                    countNotModified(path)
                    _ = sendAll(fd, Self.head(304, fields))
                } else {
                    fields += [("Content-Type", contentType), ("Content-Length", "\(body.count)")]
                    _ = sendAll(fd, Self.head(200, fields) + (method == "GET" ? body : []))
                }
                return Self.closeGracefully(fd)
            }
            respond(fd, behaviour, includeBody: method == "GET")
            if !isStopped { Self.closeGracefully(fd) }  // once stopped, the close resets instead
        }

        private func respond(_ fd: Int32, _ behaviour: Behaviour?, includeBody: Bool) {
            switch behaviour {
            case nil:
                _ = sendAll(fd, Self.simple(404, "Not Found\n", includeBody: includeBody))

            case .file(let body, let contentType)?:
                var fields = [("Content-Length", "\(body.count)")]
                if let contentType { fields.insert(("Content-Type", contentType), at: 0) }
                _ = sendAll(fd, Self.head(200, fields) + (includeBody ? body : []))

            case .status(let code, let body)?:
                let bytes = Array(body.utf8)
                let head = Self.head(
                    code,
                    [
                        ("Content-Type", "text/html; charset=utf-8"),
                        ("Content-Length", "\(bytes.count)"),
                    ])
                _ = sendAll(fd, head + (includeBody ? bytes : []))

            case .redirect(let location, let code)?:
                _ = sendAll(fd, Self.head(code, [("Location", location), ("Content-Length", "0")]))

            case .drip(let contentType, let perSecond, let total)?:
                let head = Self.head(200, [("Content-Type", contentType), ("Content-Length", "\(total)")])
                guard sendAll(fd, head), includeBody else { return }
                var sent = 0
                while sent < total {
                    let n = min(max(perSecond, 0), total - sent)
                    if n > 0 {
                        guard !isStopped, sendAll(fd, [UInt8](repeating: 0xFF, count: n)) else { return }
                        sent += n
                    }
                    if sent < total, !pause(fd, seconds: 1) { return }
                }

            case .endless(let contentType)?:
                let head = Self.head(200, [("Content-Type", contentType)])
                guard sendAll(fd, head), includeBody else { return }
                let chunk = [UInt8](repeating: 0xFF, count: 64 * 1024)
                while !isStopped, sendAll(fd, chunk) {}

            case .delayed(let delay, let body, let contentType)?:
                let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
                guard pause(fd, seconds: seconds) else { return }
                let head = Self.head(200, [("Content-Type", contentType), ("Content-Length", "\(body.count)")])
                _ = sendAll(fd, head + (includeBody ? body : []))

            case .declaredLength(let length, let body, let contentType)?:
                let head = Self.head(200, [("Content-Type", contentType), ("Content-Length", "\(length)")])
                _ = sendAll(fd, head + (includeBody ? body : []))

            case .cacheable?:
                break  // answered in serve(_:)

            case .headers(let fields, let code, let body)?:
                var fields = fields
                if !fields.contains(where: { $0.0.lowercased() == "connection" }) {
                    fields.append(("Connection", "close"))
                }
                _ = sendAll(fd, Self.head(code, fields, addClose: false) + (includeBody ? body : []))
            }
        }

        /// Waits `seconds` in 50 ms steps; false once stopped or the peer has closed.
        private func pause(_ fd: Int32, seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if isStopped { return false }
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&pfd, 1, 50)
                if ready < 0 && errno != EINTR { return false }
                if ready > 0 {
                    var scratch = [UInt8](repeating: 0, count: 4096)
                    let n = recv(fd, &scratch, scratch.count, Int32(MSG_DONTWAIT))
                    if n == 0 { return false }
                    if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { return false }
                }
            }
            return !isStopped
        }

        // MARK: Socket helpers

        #if os(Linux)
            private static let streamType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            private static let sendFlags = Int32(MSG_NOSIGNAL)
        #else
            private static let streamType = SOCK_STREAM
            private static let sendFlags: Int32 = 0
        #endif

        static func openListener() throws -> (Int32, Int) {
            let fd = socket(AF_INET, streamType, 0)
            guard fd >= 0 else { throw SetupError(call: "socket", code: errno) }
            var ready = false
            defer { if !ready { _ = close(fd) } }

            var one: Int32 = 1
            let size = socklen_t(MemoryLayout<Int32>.size)
            guard setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) == 0 else {
                throw SetupError(call: "setsockopt(SO_REUSEADDR)", code: errno)
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
            guard bound == 0 else { throw SetupError(call: "bind", code: errno) }
            guard listen(fd, 128) == 0 else { throw SetupError(call: "listen", code: errno) }
            let named = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw SetupError(call: "getsockname", code: errno) }
            ready = true
            return (fd, Int(UInt16(bigEndian: addr.sin_port)))
        }

        private static func acceptConnection(_ listener: Int32) -> Int32 {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return fd }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // don't leak into processes a test spawns
            #if !os(Linux)
                var one: Int32 = 1
                _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            return fd
        }

        private static func setTimeout(_ fd: Int32, _ option: Int32, milliseconds: Int) {
            var tv = timeval(tv_sec: milliseconds / 1000, tv_usec: .init(milliseconds % 1000 * 1000))
            _ = setsockopt(fd, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size))
        }

        /// Reads up to and including the blank line ending the request head.
        /// nil: the peer closed or failed first; `.some(nil)`: the head exceeds 64 KiB.
        private static func readHead(_ fd: Int32) -> [UInt8]?? {
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
        private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
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
        private static func closeGracefully(_ fd: Int32) {
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

        private static func head(_ code: Int, _ fields: [(String, String)], addClose: Bool = true) -> [UInt8] {
            var text = "HTTP/1.1 \(code) \(reason(code))\r\n"
            for (name, value) in fields { text += "\(name): \(value)\r\n" }
            if addClose { text += "Connection: close\r\n" }
            text += "\r\n"
            return Array(text.utf8)
        }

        private static func simple(_ code: Int, _ body: String, includeBody: Bool) -> [UInt8] {
            let bytes = Array(body.utf8)
            let fields = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(bytes.count)")]
            return head(code, fields) + (includeBody ? bytes : [])
        }

        private static func reason(_ code: Int) -> String {
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
}
