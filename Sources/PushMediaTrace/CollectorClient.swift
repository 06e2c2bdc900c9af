import CPushMediaShim
import PushMedia

/// Posts export requests to the collector (OTLP/HTTP, protobuf) with one libcurl handle that
/// the exporter's thread owns and keeps, with its connection, from batch to batch. The
/// collector is the operator's: any http(s) address, private ones included.
final class CollectorClient {
    private let handle: UnsafeMutableRawPointer
    private let headers: UnsafeMutablePointer<curl_slist>?
    private let url: String
    private let timeout: Duration

    /// Why a batch did not reach the collector: no answer, or an answer that is not 2xx.
    enum Failure: Error, CustomStringConvertible {
        case transfer(String)
        case status(Int)

        var description: String {
            switch self {
            case .transfer(let reason): reason
            case .status(let status): "the collector answered HTTP \(status)"
            }
        }
    }

    /// Nil when libcurl cannot make a handle.
    init?(url: String, headers: [(String, String)], timeout: Duration) {
        _ = Curl.ready
        guard let handle = curl_easy_init() else { return nil }
        self.handle = handle
        self.url = url
        self.timeout = timeout
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in [("Content-Type", "application/x-protobuf")] + headers {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        // No `Expect: 100-continue` round trip before a batch.
        list = curl_slist_append(list, "Expect:")
        self.headers = list
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headers)
    }

    /// Posts `body`; throws unless the collector answered 2xx within the timeout. Blocks.
    func post(_ body: [UInt8]) throws(Failure) {
        var options = CurlOptions(handle: handle)
        options.set(CURLOPT_URL, url)
        options.set(CURLOPT_PROTOCOLS_STR, "http,https")
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_TIMEOUT_MS, max(1, Int(timeout.components.seconds * 1000)))
        options.set(CURLOPT_HTTPHEADER, list: headers)
        options.set(CURLOPT_POST, 1)
        options.set(CURLOPT_USERAGENT, "PushMedia/\(PushMediaVersion.string)")
        let handle = handle
        options.then { pm_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count } }
        let code: CURLcode = body.withUnsafeBufferPointer { bytes in
            options.set(CURLOPT_POSTFIELDSIZE_LARGE, size: Int64(bytes.count))
            options.then {
                pm_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            }
            guard options.code == CURLE_OK else { return options.code }
            let code = curl_easy_perform(handle)
            // The body is the caller's: libcurl keeps no pointer to it past this transfer.
            _ = pm_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, nil)
            return code
        }
        guard code == CURLE_OK else { throw .transfer(String(cString: curl_easy_strerror(code))) }
        let status = CurlInfo(handle: handle).status
        guard (200..<300).contains(status) else { throw .status(status) }
    }
}
