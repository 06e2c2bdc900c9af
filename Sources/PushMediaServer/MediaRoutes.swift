import Foundation
import HTTPTypes
import Hummingbird
import PushMedia

/// `GET|HEAD /media/<name>`: serves the store's files, and nothing else (`StoredMedia`), cached
/// for a year: a name is its content's SHA-256. With `--base-url` pointing at the bucket or a
/// CDN, phones never come here.
struct MediaRoutes<Context: RequestContext>: Sendable {
    let media: StoredMedia

    func add(to router: Router<Context>) {
        router.get("media/{name}", use: serve)
        router.head("media/{name}", use: serve)
    }

    @Sendable func serve(_ request: Request, context: Context) async throws -> Response {
        let name = context.parameters.get("name") ?? ""
        guard MediaStore.isValidName(name) else {
            throw APIError(.notFound, code: "not_found", message: "no such media")
        }
        return try await media.respond(
            name, request: request, context: context, headers: [.cacheControl: "public, max-age=31536000, immutable"])
    }
}

/// Answers with a stored file, so the hook works as a media origin with either backend. A local
/// store's files are sent from disk; an object store's are streamed from the bucket as they
/// arrive (a HEAD for the size, then a GET of the requested range). `HEAD`, a single `Range`,
/// `If-None-Match` against the strong `ETag` (the content's SHA-256).
struct StoredMedia: Sendable {
    let store: MediaStore
    let fileIO = FileIO()
    /// Object-store transfers (each holds a thread while it streams) and the reads that forward
    /// their bytes: separate, so readers always find a thread (the process's `ProcessResources`).
    let transfers: BlockingExecutor
    let reads: BlockingExecutor
    /// A local store's recently served files (`--media-memory`).
    let memory: MediaMemory

    init(store: MediaStore, memoryLimit: Int64, resources: ProcessResources) {
        self.store = store
        transfers = resources.mediaTransfers
        reads = resources.mediaReads
        memory = MediaMemory(limit: store.directory == nil ? 0 : memoryLimit)
    }

    /// The answer for the stored file `name` (a valid store name): its type, validators and
    /// body, with `headers` added (its caching, at least). 404 when there is no such file.
    func respond(_ name: String, request: Request, context: some RequestContext, headers extra: HTTPFields)
        async throws -> Response
    {
        guard let contentType = mediaContentTypes[String(name.split(separator: ".").last ?? "")] else {
            throw APIError(.notFound, code: "not_found", message: "no such media")
        }
        let local = store.localPath(of: name)
        let size: Int
        var identity: MediaMemory.Identity?
        if let local {
            var info = stat()
            guard stat(local, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                throw APIError(.notFound, code: "not_found", message: "no such media")
            }
            size = Int(info.st_size)
            identity = MediaMemory.Identity(info)
        } else {
            let found: Int64?
            do { found = try await transfers.run { [store] in try store.size(of: name) } } catch {
                throw APIError(
                    .badGateway, code: "store_unavailable", message: "the object store did not answer: \(error)")
            }
            guard let found else { throw APIError(.notFound, code: "not_found", message: "no such media") }
            size = Int(found)
        }
        // A local file is only answered for (GET, HEAD, conditional or ranged) while its content
        // is what its name (its SHA-256) says: one truncated, cut or altered behind the store's
        // back is not (a cache hit notices one whose size changed, and makes it again). Each
        // version of a file (device, inode, size, mtime) is hashed once: as it is read into memory
        // when it is small enough to keep there, apart otherwise.
        var kept: ByteBuffer?
        if let local, let identity {
            let expected = String(name.prefix(64))
            let corrupt = APIError(
                .notFound, code: "not_found", message: "no such media (the stored file no longer matches its name)")
            if memory.keeps(size: size) {
                kept = memory.bytes(name, identity: identity)
                if kept == nil, let read = await reads.run({ Self.readWhole(local, identity: identity) }) {
                    guard read.withUnsafeReadableBytes({ MediaStore.sha256($0) }) == expected else { throw corrupt }
                    memory.keep(name, identity: identity, bytes: read)
                    kept = read
                }
            }
            if kept == nil, !memory.isVerified(name, identity: identity) {
                let hash = await reads.run { try? MediaStore.sha256(file: local) }
                guard hash == expected else { throw corrupt }
                memory.markVerified(name, identity: identity)
            }
        }
        let etag = "\"\(name.split(separator: ".")[0])\""
        var headers: HTTPFields = [
            .contentType: contentType,
            .eTag: etag,
            .acceptRanges: "bytes",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        headers.append(contentsOf: extra)
        if let match = request.headers[.ifNoneMatch],
            match.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == etag || $0.trimmingCharacters(in: .whitespaces) == "*"
            })
        {
            return Response(status: .notModified, headers: headers)
        }
        var status = HTTPResponse.Status.ok
        var range = 0...max(0, size - 1)
        if let header = request.headers[.range], request.headers[.ifRange].map({ $0 == etag }) ?? true {
            switch Self.parseRange(header, size: size) {
            case let .satisfiable(requested):
                range = requested
                status = .partialContent
                headers[.contentRange] = "bytes \(requested.lowerBound)-\(requested.upperBound)/\(size)"
            case .unsatisfiable:
                headers[.contentRange] = "bytes */\(size)"
                headers[.contentLength] = "0"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            case .ignored:
                break
            }
        }
        let length = size == 0 ? 0 : range.count
        headers[.contentLength] = String(length)
        if request.method == .head || length == 0 {
            // The writer must be finished even with nothing to write: an unfinished response keeps
            // the connection busy, and a graceful stop would wait for it forever.
            return Response(
                status: status, headers: headers,
                body: ResponseBody(contentLength: length) { writer in try await writer.finish(nil) })
        }
        if let local {
            if let kept, let slice = kept.getSlice(at: range.lowerBound, length: length) {
                return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: slice))
            }
            let body = try await fileIO.loadFile(path: local, range: range, context: context)
            return Response(status: status, headers: headers, body: body)
        }
        return Response(
            status: status, headers: headers,
            body: streamed(name, range: status == .partialContent ? range : nil, length: length))
    }

    /// The object's bytes through a pipe: the transfer writes into it (blocking while the client
    /// is slow), the body reads it in 64 KiB chunks. A client that goes away closes the read end,
    /// which ends the transfer.
    private func streamed(_ name: String, range: ClosedRange<Int>?, length: Int) -> ResponseBody {
        ResponseBody(contentLength: length) { [store, transfers, reads] writer in
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else {
                throw APIError(.internalServerError, code: "pipe_failed", message: String(cString: strerror(errno)))
            }
            let (readEnd, writeEnd) = (fds[0], fds[1])
            let transfer = Task {
                await transfers.run { () -> String? in
                    defer { close(writeEnd) }
                    do { try store.read(name, range: range, to: writeEnd) } catch { return "\(error)" }
                    return nil
                }
            }
            defer { close(readEnd) }
            var sent = 0
            while sent < length {
                let chunk = await reads.run { () -> [UInt8]? in
                    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                    let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                    return count > 0 ? Array(buffer[..<count]) : nil
                }
                guard let chunk else { break }
                sent += chunk.count
                try await writer.write(ByteBuffer(bytes: chunk))
            }
            if sent < length {
                // The object store failed mid-way: close the connection short of Content-Length.
                let failure = await transfer.value ?? "the object ended early"
                throw APIError(.badGateway, code: "store_unavailable", message: failure)
            }
            try await writer.finish(nil)
        }
    }

    /// The whole file, when it is still the version `identity` describes (nil otherwise: it
    /// changed since the route's `stat`, and is then read the ordinary way). Blocking.
    static func readWhole(_ path: String, identity: MediaMemory.Identity) -> ByteBuffer? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, MediaMemory.Identity(info) == identity else { return nil }
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
