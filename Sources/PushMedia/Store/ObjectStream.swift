import CPushMediaShim
import Foundation

/// The status and size of an object-store answer, as far as serving it needs.
public struct ObjectHead: Sendable, Equatable {
    public var status: Int
    /// `Content-Length` (for a HEAD: the object's size).
    public var contentLength: Int64?
}

/// One object-store request whose answer is read as it arrives: its head, then its body in
/// chunks. At most `window` bytes wait for the reader; past that the transfer is paused until the
/// reader has taken half of them, so a slow client never makes the node hold a whole video. Run
/// by a `TransferLoop`: the reader suspends (no thread waits) and the loop never waits for it.
/// A reader that stops reading calls `cancel()`, which ends the transfer.
public final class ObjectStream: @unchecked Sendable {
    /// Bytes that may wait for the reader before the transfer pauses.
    public static let window = 32 * 1024
    /// Most header lines an answer may have.
    static let maxHeaderLines = 100

    let endpoint: String
    private let loop: TransferLoop
    /// Sets the easy handle's options and returns its header list (called once, on the loop's thread).
    private let setup: (inout CurlOptions) -> UnsafeMutablePointer<curl_slist>?
    private let lock = NSLock()
    private var state = State()

    private struct State {
        var status: Int?
        var contentLength: Int64?
        var headerLines = 0
        var head: Result<ObjectHead, StoreError>?
        var chunks: [[UInt8]] = []
        var buffered = 0
        var paused = false
        /// Set once: the whole body arrived (success), or the transfer failed or was cancelled.
        var end: Result<Void, StoreError>?
        var headWaiter: CheckedContinuation<Result<ObjectHead, StoreError>, Never>?
        var chunkWaiter: CheckedContinuation<Result<[UInt8]?, StoreError>, Never>?
    }

    init(
        endpoint: String, loop: TransferLoop,
        setup: @escaping (inout CurlOptions) -> UnsafeMutablePointer<curl_slist>?
    ) {
        self.endpoint = endpoint
        self.loop = loop
        self.setup = setup
    }

    /// Starts the transfer on its loop.
    func start() { loop.start(self) }

    // MARK: The reader's side

    /// The answer's status and size, once its headers have arrived; `StoreError.unavailable`
    /// when they have not within `limit` (the transfer is then ended), or the store failed.
    public func head(within limit: Duration) async throws(StoreError) -> ObjectHead {
        let timer = expire(after: limit, unless: { $0.head != nil }, reason: "no answer within \(limit)")
        defer { timer.cancel() }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Result<ObjectHead, StoreError>, Never>) in
                lock.lock()
                if let head = state.head {
                    lock.unlock()
                    waiter.resume(returning: head)
                } else {
                    state.headWaiter = waiter
                    lock.unlock()
                }
            }
        } onCancel: {
            cancel()
        }
        return try result.get()
    }

    /// Ends the transfer with `StoreError.unavailable` unless it is over within `limit`.
    public func finish(within limit: Duration) {
        _ = expire(after: limit, unless: { $0.end != nil }, reason: "not over within \(limit)")
    }

    /// Fails the transfer after `limit` unless `done` holds then; cancel the item to call it off.
    private func expire(after limit: Duration, unless done: @escaping (State) -> Bool, reason: String)
        -> DispatchWorkItem
    {
        let timer = DispatchWorkItem { [weak self] in
            guard let self, !lock.withLock({ done(state) }) else { return }
            fail(.unavailable(endpoint: endpoint, reason: reason))
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(limit.nanoseconds)), execute: timer)
        return timer
    }

    /// The next chunk of the body, nil once the whole body has arrived; throws when the store
    /// failed part way (or the stream was cancelled).
    public func next() async throws(StoreError) -> [UInt8]? {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Result<[UInt8]?, StoreError>, Never>) in
                lock.lock()
                if !state.chunks.isEmpty {
                    let chunk = state.chunks.removeFirst()
                    state.buffered -= chunk.count
                    let resume = state.paused && state.buffered <= Self.window / 2
                    if resume { state.paused = false }
                    lock.unlock()
                    if resume { loop.resume(self) }
                    waiter.resume(returning: .success(chunk))
                } else if let end = state.end {
                    lock.unlock()
                    waiter.resume(returning: end.map { nil })
                } else {
                    state.chunkWaiter = waiter
                    lock.unlock()
                }
            }
        } onCancel: {
            cancel()
        }
        return try result.get()
    }

    /// Ends the transfer (the reader is done with it); a reader still waiting gets an error.
    public func cancel() {
        fail(.unavailable(endpoint: endpoint, reason: "the transfer was cancelled"))
    }

    private func fail(_ error: StoreError) {
        lock.lock()
        guard state.end == nil else { return lock.unlock() }
        state.end = .failure(error)
        if state.head == nil { state.head = .failure(error) }
        let waiters = (state.headWaiter, state.chunkWaiter)
        state.headWaiter = nil
        state.chunkWaiter = nil
        lock.unlock()
        waiters.0?.resume(returning: .failure(error))
        waiters.1?.resume(returning: .failure(error))
        loop.remove(self)
    }

    // MARK: The loop's side (its thread only)

    /// The easy handle's options: the request's, then the callbacks that feed this stream.
    func prepare(_ handle: UnsafeMutableRawPointer) -> (CURLcode, UnsafeMutablePointer<curl_slist>?) {
        var options = CurlOptions(handle: handle)
        let headers = setup(&options)
        let context = Unmanaged.passUnretained(self).toOpaque()
        for (option, value) in [(CURLOPT_WRITEFUNCTION, Self.onBody), (CURLOPT_HEADERFUNCTION, Self.onHeader)] {
            options.then { pm_curl_setopt_callback(handle, option, value) }
        }
        for option in [CURLOPT_WRITEDATA, CURLOPT_HEADERDATA] {
            options.then { pm_curl_setopt_pointer(handle, option, context) }
        }
        return (options.code, headers)
    }

    /// The transfer ended with `code` (the loop has removed and freed its handle).
    func ended(_ code: CURLcode) {
        lock.lock()
        if state.end != nil { return lock.unlock() }
        let error: StoreError? =
            code == CURLE_OK ? nil : .unavailable(endpoint: endpoint, reason: String(cString: curl_easy_strerror(code)))
        state.end = error.map { .failure($0) } ?? .success(())
        if state.head == nil {
            state.head = .failure(error ?? .unavailable(endpoint: endpoint, reason: "the answer had no status line"))
        }
        let headWaiter = state.headWaiter
        state.headWaiter = nil
        // A reader waits only when no chunk is left: it learns how the body ended.
        let chunkWaiter = state.chunkWaiter
        state.chunkWaiter = nil
        let head = state.head
        lock.unlock()
        if let head { headWaiter?.resume(returning: head) }
        chunkWaiter?.resume(returning: error.map { .failure($0) } ?? .success(nil))
    }

    private static let onBody: pm_curl_data_fn = { data, size, count, context in
        Unmanaged<ObjectStream>.fromOpaque(context!).takeUnretainedValue()
            .received(UnsafeRawBufferPointer(start: data, count: size * count))
    }

    private static let onHeader: pm_curl_data_fn = { data, size, count, context in
        Unmanaged<ObjectStream>.fromOpaque(context!).takeUnretainedValue()
            .headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
    }

    /// Body bytes: handed to a waiting reader, kept, or held back by pausing when `window` bytes wait.
    private func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        lock.lock()
        if state.end != nil {
            lock.unlock()
            return 0  // cancelled: libcurl ends the transfer
        }
        if state.buffered >= Self.window {
            state.paused = true
            lock.unlock()
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let chunk = [UInt8](bytes)
        let waiter = state.chunkWaiter
        state.chunkWaiter = nil
        if waiter == nil {
            state.chunks.append(chunk)
            state.buffered += chunk.count
        }
        lock.unlock()
        waiter?.resume(returning: .success(chunk))
        return bytes.count
    }

    /// One header line: the status line, `Content-Length`, and the blank line that ends the head
    /// (interim 1xx heads are skipped).
    private func headerLine(_ line: UnsafeRawBufferPointer) -> Int {
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        lock.lock()
        state.headerLines += 1
        guard state.headerLines <= Self.maxHeaderLines, state.end == nil else {
            lock.unlock()
            return 0
        }
        var ready: (CheckedContinuation<Result<ObjectHead, StoreError>, Never>, ObjectHead)?
        if text.hasPrefix("HTTP/") {
            let parts = text.split(separator: " ", maxSplits: 2)
            state.status = parts.count >= 2 ? Int(parts[1]) : nil
            state.contentLength = nil
        } else if text.isEmpty {
            if let status = state.status, status >= 200, state.head == nil {
                let head = ObjectHead(status: status, contentLength: state.contentLength)
                state.head = .success(head)
                if let waiter = state.headWaiter { ready = (waiter, head) }
                state.headWaiter = nil
            }
        } else if let colon = text.firstIndex(of: ":"),
            text[..<colon].caseInsensitiveCompare("content-length") == .orderedSame
        {
            state.contentLength = Int64(text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        lock.unlock()
        if let (waiter, head) = ready { waiter.resume(returning: .success(head)) }
        return line.count
    }
}
