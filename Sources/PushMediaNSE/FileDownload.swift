import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A downloaded attachment file, named with its type's extension.
public struct DownloadedFile: Sendable, Equatable {
    public var fileURL: URL
    public var type: AttachmentType
    public var bytes: Int64
}

/// One download into a file: streamed to disk (the extension's memory is small), stopped at a
/// deadline or as soon as it passes its byte limit, and checked when complete: status 200, a
/// compatible Content-Type, every byte the server announced, first bytes of the expected type.
/// The file appears under its final name only when every check passed.
final class FileDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// What the file must be.
    struct Expectation: Sendable {
        /// The type the descriptor promises; nil lets the first bytes decide.
        var type: AttachmentType?
        /// The exact size the descriptor gives.
        var bytes: Int64?
        var maxRedirects: Int

        /// The most bytes worth receiving.
        var limit: Int64 { bytes ?? type?.maxBytes ?? AttachmentType.maxBytes(for: .video) }
    }

    private let url: URL
    private let expectation: Expectation
    private let directory: URL
    private let deadline: Date
    /// The time the download was given, for messages.
    private var seconds: Double = 0
    private let finish: DeliverOnce<Result<DownloadedFile, NSEError>>

    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var timer: DispatchWorkItem?
    private var handle: FileHandle?
    private var partial: URL?
    private var received: Int64 = 0
    private var announced: Int64?
    private var head: [UInt8] = []
    private var redirects = 0
    private var done = false

    init(
        url: URL, expectation: Expectation, directory: URL, deadline: Date,
        completion: @escaping (Result<DownloadedFile, NSEError>) -> Void
    ) {
        self.url = url
        self.expectation = expectation
        self.directory = directory
        self.deadline = deadline
        self.finish = DeliverOnce(completion)
    }

    private var name: String { url.absoluteString }

    /// Starts the download; the completion is called exactly once (unless `cancel` comes first).
    func start() {
        let seconds = deadline.timeIntervalSinceNow
        self.seconds = max(0, seconds)
        guard seconds > 0 else { return fail(.timeout(url: name, seconds: 0)) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        configuration.timeoutIntervalForRequest = seconds
        configuration.timeoutIntervalForResource = seconds
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: seconds)
        request.setValue(expectation.type?.mime ?? "image/*, audio/*, video/*", forHTTPHeaderField: "Accept")
        let task = session.dataTask(with: request)
        let timer = DispatchWorkItem { [weak self] in
            guard let self else { return }
            self.fail(.timeout(url: self.name, seconds: seconds))
        }
        lock.lock()
        self.task = task
        self.timer = timer
        lock.unlock()
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
        task.resume()
        // The session lets go of its delegate (this object) once the task has ended.
        session.finishTasksAndInvalidate()
    }

    /// Stops the download without calling the completion, and removes what was written.
    func cancel() {
        guard end() else { return }
        removePartialFile()
        finish.discard()
    }

    // MARK: URLSessionDataDelegate

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        guard let http = response as? HTTPURLResponse else {
            fail(.transport(url: name, message: "not an HTTP response"))
            return completionHandler(.cancel)
        }
        guard http.statusCode == 200 else {
            fail(.http(status: http.statusCode, url: name))
            return completionHandler(.cancel)
        }
        let contentType = http.value(forHTTPHeaderField: "Content-Type")
        if let type = expectation.type, !type.accepts(contentType: contentType) {
            fail(.wrongType(url: name, expected: type.uti, found: contentType ?? "?"))
            return completionHandler(.cancel)
        }
        let length = response.expectedContentLength
        if length > expectation.limit {
            fail(.tooLarge(url: name, limit: expectation.limit))
            return completionHandler(.cancel)
        }
        let file = directory.appendingPathComponent(UUID().uuidString + ".partial")
        guard FileManager.default.createFile(atPath: file.path, contents: nil),
            let handle = try? FileHandle(forWritingTo: file)
        else {
            fail(.file(path: file.path, message: "cannot create the file"))
            return completionHandler(.cancel)
        }
        lock.lock()
        if done {
            lock.unlock()
            try? handle.close()
            try? FileManager.default.removeItem(at: file)
            return completionHandler(.cancel)
        }
        self.handle = handle
        partial = file
        announced = length >= 0 ? length : nil
        lock.unlock()
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        guard !done, let handle else { return lock.unlock() }
        received += Int64(data.count)
        if head.count < AttachmentType.sniffLength { head += data.prefix(AttachmentType.sniffLength - head.count) }
        let over = received > expectation.limit
        var failure: NSEError?
        if over {
            failure = .tooLarge(url: name, limit: expectation.limit)
        } else {
            do { try handle.write(contentsOf: data) } catch {
                failure = .file(path: partial?.path ?? "?", message: "\(error)")
            }
        }
        lock.unlock()
        if let failure { fail(failure) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        lock.lock()
        redirects += 1
        let count = redirects
        lock.unlock()
        let scheme = request.url?.scheme?.lowercased()
        guard count <= expectation.maxRedirects, scheme == "https" || scheme == "http" else {
            fail(
                .transport(
                    url: name,
                    message: count > expectation.maxRedirects
                        ? "more than \(expectation.maxRedirects) redirects" : "redirected to a URL that is not http(s)")
            )
            return completionHandler(nil)
        }
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let received = self.received
        let announced = self.announced
        let head = self.head
        let alreadyDone = done
        lock.unlock()
        if alreadyDone { return }
        if let error, (error as NSError).code == NSURLErrorTimedOut {
            return fail(.timeout(url: name, seconds: seconds))
        }
        if let announced, received < announced {
            return fail(.truncated(url: name, received: received, expected: announced))
        }
        if let error {
            return fail(.transport(url: name, message: error.localizedDescription))
        }
        if let bytes = expectation.bytes, received != bytes {
            return fail(
                received < bytes
                    ? .truncated(url: name, received: received, expected: bytes)
                    : .tooLarge(url: name, limit: bytes))
        }
        guard let sniffed = AttachmentType.sniff(head) else {
            let found = head.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " ")
            return fail(
                .wrongType(
                    url: name, expected: expectation.type?.uti ?? "an attachment type",
                    found: "a file starting \(found)"))
        }
        if let type = expectation.type, !type.matches(sniffed) {
            return fail(.wrongType(url: name, expected: type.uti, found: sniffed.uti))
        }
        let type = expectation.type ?? sniffed
        if received > type.maxBytes { return fail(.tooLarge(url: name, limit: type.maxBytes)) }
        succeed(type: type, bytes: received)
    }

    // MARK: Ending

    /// Marks the download ended; false when it already was. Stops the timer and the task.
    private func end() -> Bool {
        lock.lock()
        if done {
            lock.unlock()
            return false
        }
        done = true
        let task = self.task
        let timer = self.timer
        lock.unlock()
        timer?.cancel()
        // Not on this thread: from inside a session callback, a cancel can wait for the
        // session's queue while that queue waits for the callback.
        if let task { DispatchQueue.global().async { task.cancel() } }
        return true
    }

    private func closeFile() -> URL? {
        lock.lock()
        let handle = self.handle
        let partial = self.partial
        self.handle = nil
        lock.unlock()
        try? handle?.close()
        return partial
    }

    private func removePartialFile() {
        if let partial = closeFile() { try? FileManager.default.removeItem(at: partial) }
    }

    private func fail(_ error: NSEError) {
        guard end() else { return }
        removePartialFile()
        finish(.failure(error))
    }

    private func succeed(type: AttachmentType, bytes: Int64) {
        lock.lock()
        if done { return lock.unlock() }
        done = true
        let timer = self.timer
        lock.unlock()
        timer?.cancel()
        guard let partial = closeFile() else {
            finish(.failure(.file(path: directory.path, message: "nothing was written")))
            return
        }
        let final = directory.appendingPathComponent(UUID().uuidString + "." + type.fileExtension)
        do {
            try FileManager.default.moveItem(at: partial, to: final)
        } catch {
            try? FileManager.default.removeItem(at: partial)
            finish(.failure(.file(path: final.path, message: "\(error)")))
            return
        }
        finish(.success(DownloadedFile(fileURL: final, type: type, bytes: bytes)))
    }
}
