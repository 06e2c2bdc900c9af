import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PushMedia

/// Answers with a stored file, so the hook works as a media origin with either backend. A local
/// store's files are sent from disk; an object store's are streamed from the bucket as they
/// arrive (`ObjectStream`: paused while the client is slow, ended when it goes away). `HEAD`, a
/// single `Range`, `If-None-Match` against the strong `ETag` (the content's SHA-256).
struct StoredMedia: Sendable {
    let store: MediaStore
    /// An object store's transfers (the process's `ProcessResources.storeStreams`).
    let streams: TransferLoop
    /// A local store's reads and checks of its files.
    let reads: BlockingExecutor
    /// Recently served files (`--media-memory`).
    let memory: ServedFiles
    /// An object store's files being read into memory, each by the first request that wanted it.
    private let reading = Locked<[String: Task<ObjectRead, Never>]>([:])
    /// How long an object store may take to start answering (`--media-wait`).
    let wait: Duration
    /// Where phones can fetch stored files without this server (`--base-url` when it points at the
    /// bucket or a CDN in front of it): the answer when the object store does not answer in time.
    let publicBase: String?

    init(
        store: MediaStore, memoryLimit: Int64, resources: ProcessResources, wait: Duration = .seconds(5),
        publicBase: String? = nil
    ) {
        self.store = store
        streams = resources.storeStreams
        reads = resources.mediaReads
        memory = ServedFiles(limit: memoryLimit)
        self.wait = wait
        self.publicBase = publicBase
    }

    /// The answer for the stored file `name` (a valid store name): its type, validators and
    /// body, with `headers` added (its caching, at least). 404 when there is no such file; when
    /// an object store does not answer within `wait`, a redirect to the file at `publicBase`, or 503.
    func respond(_ name: String, request: Request, context: some ConnectionContext, headers extra: HTTPFields)
        async throws -> Response
    {
        guard let contentType = mediaContentTypes[String(name.split(separator: ".").last ?? "")] else {
            throw APIError(.notFound, code: "not_found", message: "no such media")
        }
        let etag = "\"\(name.split(separator: ".")[0])\""
        let notModified =
            request.headers[.ifNoneMatch].map { header in
                header.split(separator: ",").contains {
                    let tag = $0.trimmingCharacters(in: .whitespaces)
                    return tag == etag || tag == "*"
                }
            } ?? false
        let local = store.localPath(of: name)
        let size: Int
        var kept: ByteBuffer?
        /// An object store's answer with the whole file, when a plain GET asked for it.
        var whole: ObjectStream?
        if let local {
            (size, kept) = try await checkedLocal(name, path: local)
        } else if let remembered = try await remembered(name) {
            (size, kept) = (remembered.readableBytes, remembered)
        } else {
            // A plain GET asks for the whole object at once (its head gives the size); a HEAD,
            // a conditional or a ranged request asks for the head first.
            let plain = request.method == .get && !notModified && request.headers[.range] == nil
            let opened = store.stream(name, range: nil, bodyless: !plain, on: streams)!
            size = try await objectSize(opened, name)
            if plain { whole = opened }
        }
        var headers: HTTPFields = [
            .contentType: contentType,
            .eTag: etag,
            .acceptRanges: "bytes",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        headers.append(contentsOf: extra)
        if notModified { return Response(status: .notModified, headers: headers) }
        guard case let (status, range)? = Self.requestedRange(request, etag: etag, size: size, headers: &headers) else {
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
        let length = size == 0 ? 0 : range.count
        headers[.contentLength] = String(length)
        if request.method == .head || length == 0 {
            whole?.cancel()
            // The writer must be finished even with nothing to write: an unfinished response keeps
            // the connection busy, and a graceful stop would wait for it forever.
            return Response(
                status: status, headers: headers,
                body: ResponseBody(contentLength: length) { writer in try await writer.finish(nil) })
        }
        if let kept, let slice = kept.getSlice(at: range.lowerBound, length: length) {
            return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: slice))
        }
        let body: ResponseBody
        if let local {
            guard let file = await reads.run({ [range] in FileChunks(path: local, range: range) }) else {
                throw APIError(.notFound, code: "not_found", message: "no such media")
            }
            body = paced(
                length: length, eventLoop: context.eventLoop, end: {}, next: { await reads.run { file.next() } })
        } else {
            if status != .ok { whole?.cancel() }
            let stream = try await objectStream(name, range: range, whole: status == .ok ? whole : nil)
            body = paced(
                length: length, eventLoop: context.eventLoop, end: stream.cancel,
                next: { try await stream.next().map { ByteBuffer(bytes: $0) } })
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// The status (200 or 206) and the bytes a request asks of a file of `size` bytes, with its
    /// `Content-Range`; nil, with the headers of a 416, when the range cannot be satisfied. A range
    /// whose `If-Range` names another version, or that cannot be parsed, asks for the whole file.
    private static func requestedRange(_ request: Request, etag: String, size: Int, headers: inout HTTPFields)
        -> (HTTPResponse.Status, ClosedRange<Int>)?
    {
        let whole = 0...max(0, size - 1)
        guard let header = request.headers[.range], request.headers[.ifRange].map({ $0 == etag }) ?? true else {
            return (.ok, whole)
        }
        switch parseRange(header, size: size) {
        case let .satisfiable(requested):
            headers[.contentRange] = "bytes \(requested.lowerBound)-\(requested.upperBound)/\(size)"
            return (.partialContent, requested)
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            headers[.contentLength] = "0"
            return nil
        case .ignored:
            return (.ok, whole)
        }
    }

    /// The object store's stream of `range` of `name`: `whole`, the answer already opened for the
    /// whole file, or a ranged request whose length is checked.
    private func objectStream(_ name: String, range: ClosedRange<Int>, whole: ObjectStream?) async throws
        -> ObjectStream
    {
        if let whole { return whole }
        let stream = store.stream(name, range: range, on: streams)!
        guard try await objectSize(stream, name) == range.count else {
            stream.cancel()
            throw APIError(.badGateway, code: "store_unavailable", message: "the object store sent another range")
        }
        return stream
    }

    /// A local file's size, and its bytes when they are kept in memory. It is only answered for
    /// (GET, HEAD, conditional or ranged) while its content is what its name (its SHA-256) says:
    /// one truncated, cut or altered behind the store's back is not (a cache hit notices one
    /// whose size changed, and makes it again). Each version of a file (device, inode, size,
    /// mtime) is hashed once: as it is read into memory when it is small enough to keep there,
    /// apart otherwise.
    private func checkedLocal(_ name: String, path: String) async throws -> (size: Int, kept: ByteBuffer?) {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw APIError(.notFound, code: "not_found", message: "no such media")
        }
        let size = Int(info.st_size)
        let identity = ServedFiles.Identity(info)
        let expected = String(name.prefix(64))
        let corrupt = APIError(
            .notFound, code: "not_found", message: "no such media (the stored file no longer matches its name)")
        var kept: ByteBuffer?
        if memory.keeps(size: size) {
            kept = memory.bytes(name, identity: identity)
            if kept == nil, let read = await reads.run({ Self.readWhole(path, identity: identity) }) {
                guard read.withUnsafeReadableBytes({ MediaStore.sha256($0) }) == expected else { throw corrupt }
                memory.keep(name, identity: identity, bytes: read)
                kept = read
            }
        }
        if kept == nil, !memory.isVerified(name, identity: identity) {
            let hash = await reads.run { try? MediaStore.sha256(file: path) }
            guard hash == expected else { throw corrupt }
            memory.markVerified(name, identity: identity)
        }
        return (size, kept)
    }

    /// How reading an object store's file into memory ended.
    enum ObjectRead: Sendable {
        case kept(ByteBuffer)
        /// Larger than the memory keeps: stream it.
        case tooLarge
        case failed(APIError)
    }

    /// An object store's file from memory when it is small enough to keep there: kept already,
    /// or read whole now, once for every request that wants it meanwhile (a campaign's burst
    /// costs the store one read). Nil when it is too large: stream it.
    private func remembered(_ name: String) async throws -> ByteBuffer? {
        guard memory.limit > 0, !memory.isLarge(name) else { return nil }
        if let bytes = memory.object(name) { return bytes }
        let read = reading.withLock { running in
            if let read = running[name] { return read }
            let read = Task { [self] in
                let result = await readWhole(name)
                reading.withLock { $0[name] = nil }
                return result
            }
            running[name] = read
            return read
        }
        switch await read.value {
        case let .kept(bytes): return bytes
        case .tooLarge: return nil
        case let .failed(error): throw error
        }
    }

    /// Reads an object store's file into memory, within `wait` from start to end, and keeps it
    /// when its content is what its name says.
    private func readWhole(_ name: String) async -> ObjectRead {
        let stream = store.stream(name, range: nil, on: streams)!
        stream.finish(within: wait)
        do {
            let size = try await objectSize(stream, name)
            guard memory.keeps(size: size) else {
                stream.cancel()
                memory.markLarge(name)
                return .tooLarge
            }
            var bytes = ByteBufferAllocator().buffer(capacity: size)
            do {
                while bytes.readableBytes <= size, let chunk = try await stream.next() { bytes.writeBytes(chunk) }
            } catch {
                throw unavailable(error, name)
            }
            let hash = await reads.run { [bytes] in bytes.withUnsafeReadableBytes { MediaStore.sha256($0) } }
            guard bytes.readableBytes == size, hash == name.prefix(64) else {
                stream.cancel()
                return .failed(
                    APIError(.badGateway, code: "store_unavailable", message: "the object store sent other bytes"))
            }
            memory.keep(name, identity: nil, bytes: bytes)
            return .kept(bytes)
        } catch let error as APIError {
            return .failed(error)
        } catch {
            return .failed(unavailable(error, name))
        }
    }

    /// The answer when the object store did not answer in time: a redirect to the file at
    /// `publicBase`, or 503.
    private func unavailable(_ error: any Error, _ name: String) -> APIError {
        if let publicBase {
            var redirect = APIError(
                .temporaryRedirect, code: "store_unavailable", message: "the object store did not answer: \(error)")
            redirect.headers[.location] = publicBase + "/" + name
            redirect.headers[.cacheControl] = "no-store"
            return redirect
        }
        var unavailable = APIError(
            .serviceUnavailable, code: "store_unavailable", message: "the object store did not answer: \(error)")
        unavailable.headers[.retryAfter] = "1"
        unavailable.headers[.cacheControl] = "no-store"
        return unavailable
    }

    /// The size `stream`'s head gives (the object's, or the range's for a ranged GET): 404 when
    /// there is no such object; when the store does not answer within `wait`, a redirect to the
    /// file at `publicBase`, or 503; 502 for any other answer. The stream is ended on failure.
    private func objectSize(_ stream: ObjectStream, _ name: String) async throws -> Int {
        let head: ObjectHead
        do { head = try await stream.head(within: wait) } catch { throw unavailable(error, name) }
        switch head.status {
        case 200, 206:
            if let length = head.contentLength { return Int(length) }
        case 404:
            stream.cancel()
            throw APIError(.notFound, code: "not_found", message: "no such media")
        default:
            break
        }
        stream.cancel()
        throw APIError(
            .badGateway, code: "store_unavailable",
            message:
                "the object store answered HTTP \(head.status)\(head.contentLength == nil ? " without a length" : "")")
    }

    /// A body of `length` bytes from `next`: an object store's as they arrive, or a local
    /// file's read in chunks. `end` runs when the body is over, sent or not (a client that went
    /// away ends an object store's transfer). A source that ends short of `length` (the store
    /// failed part way) closes the connection before Content-Length, as HTTP says. Every
    /// `ObjectStream.window` bytes the writes wait for the connection's event loop to have taken
    /// them: a write returns before the loop has seen it, and only then does the next one see
    /// that the socket is full and wait for the client, so no answer piles up in memory.
    private func paced(
        length: Int, eventLoop: any EventLoop, end: @escaping @Sendable () -> Void,
        next: @escaping @Sendable () async throws -> ByteBuffer?
    ) -> ResponseBody {
        ResponseBody(contentLength: length) { writer in
            defer { end() }
            var sent = 0
            var unconfirmed = 0
            while sent < length, let chunk = try await next() {
                sent += chunk.readableBytes
                unconfirmed += chunk.readableBytes
                try await writer.write(chunk)
                if unconfirmed >= ObjectStream.window {
                    try await eventLoop.submit {}.get()
                    unconfirmed = 0
                }
            }
            guard sent == length else {
                throw APIError(.badGateway, code: "store_unavailable", message: "the stored file ended early")
            }
            try await writer.finish(nil)
        }
    }

    /// The whole file, when it is still the version `identity` describes (nil otherwise: it
    /// changed since the route's `stat`, and is then read the ordinary way). Blocking.
    static func readWhole(_ path: String, identity: ServedFiles.Identity) -> ByteBuffer? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, ServedFiles.Identity(info) == identity else { return nil }
        let size = Int(identity.size)
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw -> Int in
            var done = 0
            while done < size {
                let count = Foundation.read(fd, raw.baseAddress! + done, size - done)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                done += count
            }
            return done
        }
        return read == size ? buffer : nil
    }

    enum RangeAnswer: Equatable {
        case satisfiable(ClosedRange<Int>)
        case unsatisfiable
        /// Malformed, or several ranges: the whole file is sent (RFC 9110 allows ignoring Range).
        case ignored
    }

    /// Parses a single `bytes=` range: `a-b`, `a-`, `-n`.
    static func parseRange(_ header: String, size: Int) -> RangeAnswer {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .ignored }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .ignored }
        let first = parts[0].trimmingCharacters(in: .whitespaces)
        let last = parts[1].trimmingCharacters(in: .whitespaces)
        guard first.allSatisfy(\.isASCII), last.allSatisfy(\.isASCII) else { return .ignored }
        if first.isEmpty {
            guard let suffix = Int(last), suffix >= 0 else { return .ignored }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .satisfiable(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int(first), start >= 0 else { return .ignored }
        let end: Int
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = Int(last), value >= start else { return .ignored }
            end = min(value, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .satisfiable(start...end)
    }
}

/// MIME type by the extensions the store writes: every format a platform profile accepts (a
/// passthrough keeps its format, e.g. a BMP for `android`), and what transcodes make.
let mediaContentTypes: [String: String] = {
    let made: [MediaFormat] = [.jpeg, .png, .gif, .mp4, .m4a]
    let formats = made + PlatformProfile.profiles.values.flatMap(\.acceptedFormats)
    return Dictionary(formats.map { ($0.fileExtension, $0.mime) }, uniquingKeysWith: { first, _ in first })
}()

/// A local file's bytes in a range, read in 64 KiB chunks (blocking: call from an executor);
/// the file is closed when the reader is done with it.
final class FileChunks: @unchecked Sendable {
    static let chunk = 64 * 1024
    private let fd: Int32
    private var offset: Int
    private let end: Int

    /// Nil when the file cannot be opened.
    init?(path: String, range: ClosedRange<Int>) {
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        offset = range.lowerBound
        end = range.upperBound + 1
    }

    deinit { close(fd) }

    /// The next chunk; nil at the range's end, or when the file is shorter or unreadable.
    func next() -> ByteBuffer? {
        guard offset < end else { return nil }
        let want = min(Self.chunk, end - offset)
        var buffer = ByteBufferAllocator().buffer(capacity: want)
        let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
            var count = -1
            repeat { count = pread(fd, raw.baseAddress, want, off_t(offset)) } while count < 0 && errno == EINTR
            return max(0, count)
        }
        guard read > 0 else { return nil }
        offset += read
        return buffer
    }
}
