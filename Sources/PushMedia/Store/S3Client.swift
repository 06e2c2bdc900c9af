import CPushMediaShim
import Foundation

/// Where an S3-compatible bucket is and how to sign for it.
public struct S3Settings: Sendable, Equatable {
    /// `http(s)://host[:port]`, path-style addressing (`<endpoint>/<bucket>/<key>`).
    public var endpoint: String
    public var region: String
    public var bucket: String
    /// Key prefix without slashes at either end; "" for the bucket's root.
    public var prefix: String
    public var accessKey: String
    public var secretKey: String
    public var sessionToken: String?

    public init(
        endpoint: String, region: String = "us-east-1", bucket: String, prefix: String = "",
        accessKey: String, secretKey: String, sessionToken: String? = nil
    ) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.region = region
        self.bucket = bucket
        self.prefix = prefix.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.sessionToken = sessionToken
    }

    /// `s3://bucket/prefix`, as given to `--store`.
    public var storeURL: String { "s3://\(bucket)\(prefix.isEmpty ? "" : "/" + prefix)" }

    /// The object key of `name` under the prefix.
    func key(_ name: String) -> String { prefix.isEmpty ? name : prefix + "/" + name }
}

/// One object in a listing.
public struct ObjectInfo: Sendable, Equatable {
    /// The name under the listed prefix (e.g. `<sha256>.jpg` or `index/<key>.json`).
    public var name: String
    public var bytes: Int64
    public var modified: Date
}

/// Requests to an S3-compatible object store through libcurl, which signs them with AWS
/// Signature V4 (`CURLOPT_AWS_SIGV4`). Each calling thread keeps its own handle, so its
/// connections to the endpoint are reused. Object-store requests are not subject to the SSRF
/// rule for media origins: the endpoint is the operator's. Blocking: call from a `BlockingExecutor`.
public final class S3Client: Sendable {
    public let settings: S3Settings
    /// Longest any single request may take (bounded further by a caller's deadline).
    let requestTimeout: Duration
    let connectTimeout: Duration

    public init(settings: S3Settings, requestTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(2)) {
        self.settings = settings
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        _ = Curl.ready
    }

    /// What to send.
    enum Body {
        case none
        case bytes([UInt8])
        /// A file's content; `sha256` is its hex digest (signed as `x-amz-content-sha256`).
        case file(path: String, bytes: Int64, sha256: String)

        var isEmpty: Bool {
            if case .none = self { true } else { false }
        }
    }

    /// Where the response body goes.
    enum Sink {
        /// Collected in memory, up to `limit` bytes.
        case memory(limit: Int)
        /// Written to a file descriptor (a pipe or file), which stays open.
        case descriptor(Int32)
    }

    struct Response {
        var status: Int
        var body: [UInt8]
        /// `Last-Modified`, when the server sent one.
        var modified: Date?
        /// `Content-Length` of the answer (HEAD: the object's size).
        var contentLength: Int64?
    }

    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// Performs one request on the bucket (`key` nil: the bucket itself) and returns any HTTP answer;
    /// throws only when no answer came (connection, timeout, local I/O).
    func perform(
        _ method: String, key: String?, query: [(String, String)] = [], headers: [(String, String)] = [],
        body: Body = .none, sink: Sink = .memory(limit: 1 << 20), deadline: ContinuousClock.Instant? = nil
    ) throws(StoreError) -> Response {
        let limit = ContinuousClock.now + requestTimeout
        let transfer = CurlTransfer()
        guard transfer.start(until: deadline.map { min($0, limit) } ?? limit) else {
            throw .unavailable(endpoint: settings.endpoint, reason: "no time left for the request")
        }
        guard let handle = pm_curl_store_handle() else {
            throw .unavailable(endpoint: settings.endpoint, reason: "libcurl could not create a handle")
        }
        let t = transfer.record
        switch sink {
        case let .memory(limit):
            t.pointee.to_buffer = 1
            t.pointee.max_bytes = Int64(limit)
        case let .descriptor(fd):
            t.pointee.fd = fd
        }
        var uploadFD: Int32 = -1
        defer { if uploadFD >= 0 { close(uploadFD) } }
        let payloadHash: String
        var uploadBytes: [UInt8] = []
        switch body {
        case .none:
            payloadHash = Self.emptySHA256
        case let .bytes(bytes):
            payloadHash = Self.sha256(bytes)
            uploadBytes = bytes
        case let .file(path, _, sha256):
            payloadHash = sha256
            uploadFD = open(path, O_RDONLY | O_CLOEXEC)
            guard uploadFD >= 0 else { throw .io(path: path, reason: String(cString: strerror(errno))) }
        }

        let list = headerList(headers, payloadHash: payloadHash, method: method, emptyBody: body.isEmpty)
        defer { curl_slist_free_all(list) }

        let url = self.url(key: key, query: query)
        let code: CURLcode = uploadBytes.withUnsafeBufferPointer { upload in
            transfer.perform(on: handle) { options in
                prepare(
                    &options, method: method, url: url, headers: list,
                    connectTimeout: min(connectTimeout, transfer.allowed))
                options.set(CURLOPT_FILETIME, 1)
                guard method == "PUT" else { return }
                switch body {
                case .none:
                    break
                case .bytes:
                    t.pointee.upload_mode = 1
                    t.pointee.upload_data = upload.baseAddress
                    t.pointee.upload_length = Int64(upload.count)
                    options.then { pm_curl_install_upload(handle, t, Int64(upload.count)) }
                case let .file(_, bytes, _):
                    t.pointee.upload_mode = 2
                    t.pointee.upload_fd = uploadFD
                    options.then { pm_curl_install_upload(handle, t, bytes) }
                }
            }
        }

        let info = CurlInfo(handle: handle)
        let status = info.status
        if code != CURLE_OK || status == 0 {
            let reason: String
            switch transfer.stop {
            case let .writeFailed(message):
                throw .io(path: "request body or answer", reason: message)
            case .tooLarge: reason = "answer larger than expected"
            case .deadlinePassed: reason = "no answer within the time left"
            case .blockedAddress, .cancelled, nil: reason = String(cString: curl_easy_strerror(code))
            }
            throw .unavailable(endpoint: settings.endpoint, reason: reason)
        }
        let filetime = info.size(CURLINFO_FILETIME_T)
        return Response(
            status: status, body: transfer.body,
            modified: filetime.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            contentLength: info.size(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T))
    }

    /// The headers of a request: `headers`, the payload's hash (SigV4 signs it; s3api requires
    /// it) and the session token. Free the list with `curl_slist_free_all`.
    func headerList(_ headers: [(String, String)], payloadHash: String, method: String, emptyBody: Bool)
        -> UnsafeMutablePointer<curl_slist>?
    {
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers + [("x-amz-content-sha256", payloadHash)]
            + (settings.sessionToken.map { [("x-amz-security-token", $0)] } ?? [])
        {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        // No empty "Expect:" header to suppress 100-continue: libcurl would sign a header it then
        // leaves out, and the signature would not match.
        if emptyBody, method != "GET", method != "HEAD", method != "DELETE" {
            list = curl_slist_append(list, "Content-Length: 0")
        }
        return list
    }

    /// What every request to the bucket is: `method` on `url` over HTTP/1.1, signed with SigV4,
    /// no proxy, no signals, `headers` (owned by the caller until the transfer ends). The
    /// body's source or sink, and the timeouts past the connect, are the caller's.
    func prepare(
        _ options: inout CurlOptions, method: String, url: String, headers: UnsafeMutablePointer<curl_slist>?,
        connectTimeout: Duration
    ) {
        options.set(CURLOPT_URL, url)
        options.set(CURLOPT_PROTOCOLS_STR, "http,https")
        options.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_PROXY, "")
        options.set(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connectTimeout.milliseconds)))
        options.set(CURLOPT_AWS_SIGV4, "aws:amz:\(settings.region):s3")
        // Separately: an access key may contain a colon (USERPWD would split it there).
        options.set(CURLOPT_USERNAME, settings.accessKey)
        options.set(CURLOPT_PASSWORD, settings.secretKey)
        options.set(CURLOPT_USERAGENT, "PushMedia/\(PushMediaVersion.string)")
        switch method {
        case "HEAD": options.set(CURLOPT_NOBODY, 1)
        case "GET": break
        default: options.set(CURLOPT_CUSTOMREQUEST, method)
        }
        options.set(CURLOPT_HTTPHEADER, list: headers)
    }

    /// `GET` (or `HEAD`, `bodyless`) of object `key`, `range` of it when given, read as it
    /// arrives on `loop`: started at once; read its head, then its body. A body that stops
    /// arriving for `lowSpeedTime` (while its reader keeps up) ends the transfer.
    func stream(
        _ key: String, range: ClosedRange<Int>?, bodyless: Bool, on loop: TransferLoop,
        lowSpeedTime: Duration = .seconds(15)
    ) -> ObjectStream {
        let method = bodyless ? "HEAD" : "GET"
        let url = self.url(key: key, query: [])
        let headers = range.map { [("Range", "bytes=\($0.lowerBound)-\($0.upperBound)")] } ?? []
        let stream = ObjectStream(endpoint: settings.endpoint, loop: loop) { [self] options in
            let list = headerList(headers, payloadHash: Self.emptySHA256, method: method, emptyBody: true)
            prepare(&options, method: method, url: url, headers: list, connectTimeout: connectTimeout)
            options.then { [handle = options.handle] in pm_curl_bound_receive_buffer(handle) }
            options.set(CURLOPT_LOW_SPEED_LIMIT, 1)
            options.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(lowSpeedTime.components.seconds)))
            return list
        }
        stream.start()
        return stream
    }

    /// The error an S3 answer describes (`<Error><Code>…</Code><Message>…</Message></Error>`).
    func failure(_ response: Response, _ what: String) -> StoreError {
        let text = String(decoding: response.body, as: UTF8.self)
        let code = Self.element("Code", in: text) ?? Self.statusCode(response.status)
        let message = Self.element("Message", in: text)
        return .s3(
            endpoint: settings.endpoint, bucket: settings.bucket, what: what, status: response.status, code: code,
            message: message)
    }

    /// S3's code for an answer without a body (HEAD).
    static func statusCode(_ status: Int) -> String {
        switch status {
        case 400: "BadRequest"
        case 401: "Unauthorized"
        case 403: "AccessDenied"
        case 404: "NotFound"
        case 503: "ServiceUnavailable"
        default: "HTTP\(status)"
        }
    }

    /// `endpoint/bucket/key?query`, the query sorted by name and percent-encoded: SigV4 signs the
    /// canonical query string, and libcurl signs the query as written.
    func url(key: String?, query: [(String, String)]) -> String {
        var url = settings.endpoint + "/" + Self.encode(settings.bucket, keepSlash: false)
        if let key { url += "/" + Self.encode(key, keepSlash: true) }
        if !query.isEmpty {
            url +=
                "?"
                + query.sorted { $0.0 < $1.0 }
                .map { Self.encode($0.0, keepSlash: false) + "=" + Self.encode($0.1, keepSlash: false) }.joined(
                    separator: "&")
        }
        return url
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and `/` in keys).
    static func encode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out += "/"
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { MediaStore.sha256($0) }
    }

    // MARK: Operations

    /// Uploads an object. S3 makes it visible only once complete: a reader never sees part of it.
    func putObject(
        _ key: String, body: Body, contentType: String, cacheControl: String?, deadline: ContinuousClock.Instant? = nil
    ) throws(StoreError) {
        var headers = [("Content-Type", contentType)]
        if let cacheControl { headers.append(("Cache-Control", cacheControl)) }
        let response = try perform("PUT", key: key, headers: headers, body: body, deadline: deadline)
        guard (200..<300).contains(response.status) else { throw failure(response, "PUT \(key)") }
    }

    /// An object's bytes and modification time, nil when it does not exist.
    public func getObject(_ key: String, limit: Int, deadline: ContinuousClock.Instant? = nil) throws(StoreError) -> (
        bytes: [UInt8], modified: Date?
    )? {
        let response = try perform("GET", key: key, sink: .memory(limit: limit), deadline: deadline)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure(response, "GET \(key)") }
        return (response.body, response.modified)
    }

    /// An object's size and modification time, nil when it does not exist.
    public func headObject(_ key: String, deadline: ContinuousClock.Instant? = nil) throws(StoreError) -> (
        bytes: Int64, modified: Date?
    )? {
        let response = try perform("HEAD", key: key, deadline: deadline)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure(response, "HEAD \(key)") }
        return (response.contentLength ?? 0, response.modified)
    }

    /// Deletes an object (absent is fine).
    public func deleteObject(_ key: String) throws(StoreError) {
        let response = try perform("DELETE", key: key)
        guard (200..<300).contains(response.status) || response.status == 404 else {
            throw failure(response, "DELETE \(key)")
        }
    }

    /// Every object under `prefix` (ListObjectsV2, page by page), names relative to `prefix`.
    public func list(prefix: String, maxKeys: Int? = nil) throws(StoreError) -> [ObjectInfo] {
        var objects: [ObjectInfo] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            if let maxKeys { query.append(("max-keys", String(maxKeys))) }
            let response = try perform("GET", key: nil, query: query, sink: .memory(limit: 64 << 20))
            guard response.status == 200 else { throw failure(response, "LIST \(prefix.isEmpty ? "/" : prefix)") }
            let text = String(decoding: response.body, as: UTF8.self)
            for contents in Self.elements("Contents", in: text) {
                guard let key = Self.element("Key", in: contents), key.hasPrefix(prefix) else { continue }
                let bytes = Self.element("Size", in: contents).flatMap { Int64($0) } ?? 0
                let modified = Self.element("LastModified", in: contents).flatMap(Self.parseDate) ?? .distantPast
                objects.append(ObjectInfo(name: String(key.dropFirst(prefix.count)), bytes: bytes, modified: modified))
            }
            let truncated = Self.element("IsTruncated", in: text) == "true"
            token = truncated ? Self.element("NextContinuationToken", in: text) : nil
            if maxKeys != nil { break }
        } while token != nil
        return objects
    }

    /// Checks that the endpoint answers, the credentials are accepted and the bucket exists.
    func checkBucket(deadline: ContinuousClock.Instant? = nil) throws(StoreError) {
        let query = [
            ("list-type", "2"), ("max-keys", "1"), ("prefix", settings.prefix.isEmpty ? "" : settings.prefix + "/"),
        ]
        let response = try perform("GET", key: nil, query: query, deadline: deadline)
        guard response.status == 200 else { throw failure(response, "LIST") }
    }
}
