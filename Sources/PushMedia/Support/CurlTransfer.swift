import CPushMediaShim
import Foundation

/// One blocking libcurl transfer, the part every request shares: the record its callbacks
/// write (`pm_transfer`, owned here and freed once, with any body it collected), the clock it
/// runs against, its options set on the calling thread's handle, the perform, and what stopped
/// it early. `Fetcher` (media origins) and `S3Client` (the bucket) add their own options and
/// read the answer into their own errors. Blocking: call `perform` from a `BlockingExecutor`.
final class CurlTransfer: @unchecked Sendable {
    /// The callbacks' record: set its inputs before `perform`, read its outputs after.
    let record: UnsafeMutablePointer<pm_transfer>
    /// The time the transfer was given when its clock started (`start(until:)`).
    private(set) var allowed: Duration = .zero

    init() {
        record = .allocate(capacity: 1)
        record.initialize(to: pm_transfer())
        record.pointee.max_bytes = .max
    }

    deinit {
        pm_transfer_buffer_free(record)
        record.deallocate()
    }

    /// Starts the transfer's clock: it must end by `deadline`. False when less than a
    /// millisecond is left, and the transfer should not start.
    func start(until deadline: ContinuousClock.Instant) -> Bool {
        let remaining = deadline - .now
        guard remaining > .milliseconds(1) else { return false }
        allowed = remaining
        record.pointee.deadline_ns = pm_monotonic_ns() + remaining.nanoseconds
        return true
    }

    /// Asks the running transfer to stop at its next progress callback (from any thread).
    func cancel() { pm_transfer_cancel(record) }

    /// Installs the record's callbacks on `handle`, bounds the transfer by its clock, sets the
    /// options `configure` gives (the first that fails skips the rest) and performs it. Returns
    /// libcurl's code: the transfer's, or the failing option's.
    func perform(on handle: UnsafeMutableRawPointer, _ configure: (inout CurlOptions) -> Void) -> CURLcode {
        var options = CurlOptions(handle: handle, code: pm_curl_install_transfer(handle, record))
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_PROXY, "")  // never route through an environment proxy
        options.set(CURLOPT_TIMEOUT_MS, max(1, Int(allowed.milliseconds)))
        configure(&options)
        guard options.code == CURLE_OK else { return options.code }
        return curl_easy_perform(handle)
    }

    /// Why the callbacks stopped the transfer before its end, in the order a cause is told:
    /// nil when they did not.
    var stop: Stop? {
        let t = record.pointee
        if t.blocked != 0 {
            let address = withUnsafeBytes(of: t.blocked_address) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .blockedAddress(address)
        }
        if t.cap_exceeded != 0 { return .tooLarge }
        if t.cancelled != 0 { return .cancelled }
        if t.deadline_passed != 0 { return .deadlinePassed }
        if t.write_failed != 0 { return .writeFailed(String(cString: strerror(t.write_failed))) }
        return nil
    }

    /// What stopped a transfer early.
    enum Stop: Equatable {
        /// A connection's resolved address was refused by the address policy.
        case blockedAddress(String)
        /// More body bytes arrived than `max_bytes`.
        case tooLarge
        case cancelled
        /// The clock started by `start(until:)` ran out.
        case deadlinePassed
        /// Writing the body (or reading the upload) failed; the system's message.
        case writeFailed(String)
    }

    /// The body collected in memory (`to_buffer`).
    var body: [UInt8] {
        record.pointee.buffer.map { Array(UnsafeBufferPointer(start: $0, count: record.pointee.buffer_length)) } ?? []
    }
}

/// libcurl's process-wide set-up (`curl_global_init`), done once before the first handle:
/// `_ = Curl.ready` where handles are made (the fetcher, the bucket's client, the trace exporter).
package enum Curl {
    package static let ready: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}

/// Options set on a libcurl handle in order: the first that fails is kept and the rest are
/// skipped, so a transfer checks one code before it performs.
package struct CurlOptions {
    package let handle: UnsafeMutableRawPointer
    package private(set) var code: CURLcode

    package init(handle: UnsafeMutableRawPointer, code: CURLcode = CURLE_OK) {
        self.handle = handle
        self.code = code
    }

    package mutating func set(_ option: CURLoption, _ value: Int) {
        let handle = handle
        then { pm_curl_setopt_long(handle, option, value) }
    }
    package mutating func set(_ option: CURLoption, _ value: String) {
        let handle = handle
        then { pm_curl_setopt_string(handle, option, value) }
    }
    package mutating func set(_ option: CURLoption, size value: Int64) {
        let handle = handle
        then { pm_curl_setopt_off(handle, option, curl_off_t(value)) }
    }
    package mutating func set(_ option: CURLoption, list value: UnsafeMutablePointer<curl_slist>?) {
        let handle = handle
        then { pm_curl_setopt_slist(handle, option, value) }
    }
    /// Runs a step that sets options its own way (an upload, a receive buffer) unless one failed.
    package mutating func then(_ step: () -> CURLcode) { if code == CURLE_OK { code = step() } }
}

/// What a handle reports of its last transfer.
package struct CurlInfo {
    package let handle: UnsafeMutableRawPointer

    package init(handle: UnsafeMutableRawPointer) { self.handle = handle }

    package func int(_ info: CURLINFO) -> Int? {
        var value = 0
        return pm_curl_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }
    func size(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = -1
        return pm_curl_getinfo_off(handle, info, &value) == CURLE_OK && value >= 0 ? Int64(value) : nil
    }
    func string(_ info: CURLINFO) -> String? {
        var text: UnsafePointer<CChar>?
        return pm_curl_getinfo_string(handle, info, &text) == CURLE_OK ? text.map { String(cString: $0) } : nil
    }
    /// The last response's header `name` (after redirects).
    func header(_ name: String) -> String? { pm_curl_response_header(handle, name).map { String(cString: $0) } }
    /// The HTTP status of the last response; 0 when none arrived.
    package var status: Int { int(CURLINFO_RESPONSE_CODE) ?? 0 }
}
