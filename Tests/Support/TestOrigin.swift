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
    final class Core: @unchecked Sendable {
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

        var isStopped: Bool {
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
    }
}
