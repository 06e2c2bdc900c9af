import CPushMediaShim
import Crypto
import Foundation

/// Limits of one download.
public struct FetchLimits: Sendable {
    public var maxBytes: Int64
    public var connectTimeout: Duration
    public var lowSpeedTime: Duration
    /// Bytes per second under which `lowSpeedTime` starts counting.
    public var lowSpeedLimit = 1024
    public var maxRedirects: Int
    public var allowPrivateNetworks: Bool
    /// Exact `address:port` peers allowed even when internal (see `AddressPolicy.allows`).
    public var trustedPeers: Set<String>

    /// Identifies the address policy, so that a connection opened under one policy is never
    /// reused under another.
    var policyTag: UInt64 {
        var hash: UInt64 = allowPrivateNetworks ? 0x9E37_79B9_7F4A_7C15 : 0xC2B2_AE3D_27D4_EB4F
        for peer in trustedPeers.sorted() {
            for byte in peer.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01B3
        }
        return hash | 1
    }

    public init(config: PushMediaConfig) {
        trustedPeers = Set(config.trustedPeers)
        maxBytes = config.maxSourceBytes
        connectTimeout = config.connectTimeout
        lowSpeedTime = config.lowSpeedTime
        maxRedirects = config.maxRedirects
        allowPrivateNetworks = config.allowPrivateNetworks
    }
}

/// What the origin answered.
public struct FetchResponse: Sendable {
    public var httpStatus: Int
    public var bytes: Int64
    /// The origin's Content-Type: a hint only, the bytes decide.
    public var contentType: String?
    public var effectiveURL: String
    public var redirects: Int
    /// The freshness and validator headers of the last response.
    public var validators = OriginValidators()
    /// SHA-256 (lowercase hex) of the body, hashed while it was written: the file is not read
    /// again to name it. Nil for a 304.
    public var sha256: String?
    /// From the start of the transfer to its first byte of the answer, in milliseconds (libcurl's
    /// time to first byte, redirects included).
    public var firstByteMilliseconds: Int?
    /// The origin answered 304 to a conditional request: the copy held is current, nothing was downloaded.
    public var notModified: Bool { httpStatus == 304 }
}

/// Downloads http(s) URLs with libcurl into files: SSRF-checked connections, only http/https
/// (redirects too), byte cap counted while streaming, no content decoding, and an abort at the
/// deadline. Transfers block, so they run on `executor`'s threads.
public final class Fetcher: Sendable {
    private let executor: BlockingExecutor

    public init(executor: BlockingExecutor) {
        self.executor = executor
        _ = Curl.ready
    }

    /// Downloads `url` into the file at `path` (created or truncated). With `revalidating`, the
    /// request is conditional (`If-None-Match`, `If-Modified-Since`) and a 304 answer is a
    /// success with `notModified` set and an empty file.
    /// - Throws: `FetchError`, e.g. `.blockedAddress`, `.tooLarge`, `.httpStatus(404)`, `.deadlineExceeded`.
    /// `extraHeaders`: more request header fields (a trace's `traceparent`).
    public func fetch(
        _ url: String, to path: String, limits: FetchLimits, deadline: ContinuousClock.Instant,
        revalidating: OriginValidators? = nil, extraHeaders: [(String, String)] = []
    ) async throws(FetchError) -> FetchResponse {
        let state = TransferState(trusted: limits.trustedPeers)
        let outcome: Result<FetchResponse, FetchError> = await withTaskCancellationHandler {
            await executor.run {
                Self.perform(
                    url, path: path, limits: limits, deadline: deadline, conditions: revalidating,
                    extraHeaders: extraHeaders, state: state)
            }
        } onCancel: {
            state.cancel()
        }
        return try outcome.get()
    }

    private static func perform(
        _ url: String, path: String, limits: FetchLimits, deadline: ContinuousClock.Instant,
        conditions: OriginValidators?, extraHeaders: [(String, String)], state: TransferState
    ) -> Result<FetchResponse, FetchError> {
        let transfer = state.transfer
        guard transfer.start(until: deadline) else { return .failure(.deadlineExceeded) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return .failure(.localWrite("cannot create \(path): \(String(cString: strerror(errno)))"))
        }
        defer { close(fd) }
        guard let handle = pm_curl_thread_handle(limits.policyTag) else {
            return .failure(.io("libcurl could not create a handle"))
        }

        let t = transfer.record
        t.pointee.fd = fd
        t.pointee.max_bytes = limits.maxBytes
        t.pointee.check_addresses = limits.allowPrivateNetworks ? 0 : 1
        t.pointee.address_context = Unmanaged.passUnretained(state).toOpaque()
        t.pointee.data_context = Unmanaged.passUnretained(state).toOpaque()
        t.pointee.on_data = { data, length, context in
            guard let data, let context else { return }
            Unmanaged<TransferState>.fromOpaque(context).takeUnretainedValue().hasher.update(
                bufferPointer: UnsafeRawBufferPointer(start: data, count: length))
        }
        t.pointee.address_allowed = { bytes, length, port, context in
            guard let bytes, let context else { return 0 }
            let state = Unmanaged<TransferState>.fromOpaque(context).takeUnretainedValue()
            return AddressPolicy.allows(
                UnsafeBufferPointer(start: bytes, count: length), port: Int(port), trusted: state.trusted) ? 1 : 0
        }

        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        if let etag = OriginValidators.clean(conditions?.etag) {
            headers = curl_slist_append(headers, "If-None-Match: \(etag)")
        }
        if let modified = OriginValidators.clean(conditions?.lastModified) {
            headers = curl_slist_append(headers, "If-Modified-Since: \(modified)")
        }
        // Only printable ASCII: a field can neither end early nor add another.
        for (name, value) in extraHeaders
        where !name.isEmpty && name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") })
            && value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F })
        {
            headers = curl_slist_append(headers, "\(name): \(value)")
        }
        let code = transfer.perform(on: handle) { options in
            options.set(CURLOPT_URL, url)
            options.set(CURLOPT_PROTOCOLS_STR, "http,https")
            options.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            options.set(CURLOPT_FOLLOWLOCATION, 1)
            options.set(CURLOPT_MAXREDIRS, limits.maxRedirects)
            options.set(CURLOPT_FAILONERROR, 1)
            options.set(CURLOPT_HTTP_CONTENT_DECODING, 0)  // bytes as served: no gzip bombs
            options.set(CURLOPT_CONNECTTIMEOUT_MS, Int(limits.connectTimeout.milliseconds))
            options.set(CURLOPT_LOW_SPEED_LIMIT, limits.lowSpeedLimit)
            options.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(limits.lowSpeedTime.milliseconds / 1000)))
            options.set(CURLOPT_USERAGENT, "PushMedia/\(PushMediaVersion.string) (+media for push notifications)")
            options.set(CURLOPT_ACCEPT_ENCODING, "identity")
            options.set(CURLOPT_MAXFILESIZE_LARGE, size: limits.maxBytes)
            if headers != nil { options.set(CURLOPT_HTTPHEADER, list: headers) }
        }

        let info = CurlInfo(handle: handle)
        let status = info.status
        let effectiveURL = info.string(CURLINFO_EFFECTIVE_URL) ?? url
        switch transfer.stop {
        case let .blockedAddress(address): return .failure(.blockedAddress(address))
        case .tooLarge: return .failure(.tooLarge(limit: limits.maxBytes))
        case .cancelled: return .failure(.cancelled)
        case .deadlinePassed: return .failure(.deadlineExceeded)
        case let .writeFailed(reason): return .failure(.localWrite("writing \(path): \(reason)"))
        case nil: break
        }
        if code == CURLE_FILESIZE_EXCEEDED { return .failure(.tooLarge(limit: limits.maxBytes)) }
        if code == CURLE_OPERATION_TIMEDOUT && pm_monotonic_ns() >= t.pointee.deadline_ns - 5_000_000 {
            return .failure(.deadlineExceeded)
        }
        switch code {
        case CURLE_OK:
            guard (200..<300).contains(status) || (status == 304 && conditions != nil) else {
                return .failure(.httpStatus(status))
            }
            func header(_ name: String) -> String? { OriginValidators.clean(info.header(name)) }
            let validators = OriginValidators(
                etag: header("ETag"), lastModified: header("Last-Modified"), cacheControl: header("Cache-Control"),
                expires: header("Expires"), date: header("Date"), age: header("Age"))
            return .success(
                FetchResponse(
                    httpStatus: status, bytes: t.pointee.bytes_written,
                    contentType: info.string(CURLINFO_CONTENT_TYPE), effectiveURL: effectiveURL,
                    redirects: info.int(CURLINFO_REDIRECT_COUNT) ?? 0, validators: validators,
                    sha256: status == 304 ? nil : MediaStore.hex(state.hasher.finalize()),
                    firstByteMilliseconds: info.size(CURLINFO_STARTTRANSFER_TIME_T).map { Int($0 / 1000) }))
        case CURLE_HTTP_RETURNED_ERROR: return .failure(.httpStatus(status))
        case CURLE_TOO_MANY_REDIRECTS: return .failure(.tooManyRedirects(limits.maxRedirects))
        case CURLE_UNSUPPORTED_PROTOCOL:
            let scheme = URLComponents(string: effectiveURL)?.scheme ?? URLComponents(string: url)?.scheme ?? "?"
            return .failure(.unsupportedScheme(scheme))
        case CURLE_URL_MALFORMAT: return .failure(.invalidURL("libcurl cannot parse it"))
        case CURLE_COULDNT_RESOLVE_HOST:
            return .failure(.dnsFailure(URLComponents(string: effectiveURL)?.host ?? effectiveURL))
        case CURLE_COULDNT_CONNECT: return .failure(.connectionFailed(String(cString: curl_easy_strerror(code))))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(
                .timeout(
                    t.pointee.bytes_written == 0 && status == 0
                        ? "no connection within \(limits.connectTimeout)"
                        : "transfer slower than \(limits.lowSpeedLimit) B/s for \(limits.lowSpeedTime)"))
        case CURLE_PARTIAL_FILE:
            return .failure(
                .transfer(code: Int(code.rawValue), message: "connection closed before the declared Content-Length"))
        default:
            return .failure(.transfer(code: Int(code.rawValue), message: String(cString: curl_easy_strerror(code))))
        }
    }
}

/// What the callbacks share besides the transfer's record: the address rule's trusted peers and
/// the body's hash, reached through the record's contexts. Made before the transfer is queued,
/// so that another thread can cancel it.
private final class TransferState: @unchecked Sendable {
    let transfer = CurlTransfer()
    let trusted: Set<String>
    /// The body's hash so far (updated on the transfer's thread only).
    var hasher = SHA256()
    init(trusted: Set<String>) { self.trusted = trusted }
    func cancel() { transfer.cancel() }
}
