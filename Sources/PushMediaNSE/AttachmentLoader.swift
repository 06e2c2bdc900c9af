import Foundation

/// Gets a notification's attachment onto the phone within the service extension's time: reads
/// the `pushmedia` descriptor and the media URL, downloads the attachment (and, when it is slow
/// or fails, the descriptor's thumbnail), and reports exactly once.
///
/// ```swift
/// let loader = AttachmentLoader(userInfo: content.userInfo)
/// loader.start { result in … }      // once: the attachment, the thumbnail, or why neither
/// loader.expire()                    // from serviceExtensionTimeWillExpire: the best attempt, now
/// ```
///
/// Time: the extension has `timeLimit` (30 s) from `start`; everything must be over `reserve`
/// (2 s) before that. The attachment may take `firstByteAllowance + bytes / minimumThroughput`
/// (the descriptor's size at 16 kB/s), within that. When it has not arrived halfway through its
/// time, or it fails, the thumbnail is fetched too; whichever is usable at the end is reported.
public final class AttachmentLoader: @unchecked Sendable {
    /// Time and place settings; the defaults suit a service extension.
    public struct Configuration: Sendable {
        /// Where files are downloaded (the system moves an attachment's file away when it is
        /// added). Default: `PushMediaNSE` in the temporary directory.
        public var directory: URL
        /// The time the system gives the extension, counted from `start` (Apple: about 30 s).
        public var timeLimit: TimeInterval = 30
        /// Kept free before `timeLimit`, to build the content and hand it over.
        public var reserve: TimeInterval = 2
        /// Slowest download still worth waiting for, in bytes per second.
        public var minimumThroughput: Double = 16_000
        /// Time allowed for DNS, connection, TLS and the first byte.
        public var firstByteAllowance: TimeInterval = 5
        /// Redirects followed at most.
        public var maxRedirects = 5

        public init(
            directory: URL = FileManager.default.temporaryDirectory.appendingPathComponent(
                "PushMediaNSE", isDirectory: true)
        ) {
            self.directory = directory
        }
    }

    /// A file ready to attach, with its options.
    public struct LocalAttachment: Sendable, Equatable {
        public var file: DownloadedFile
        public var options: AttachmentOptions
        /// Where it was downloaded from.
        public var source: URL
    }

    /// The one report of a loader.
    public enum Outcome: Sendable, Equatable {
        /// The attachment arrived.
        case attachment(LocalAttachment)
        /// The attachment did not (`because`); its thumbnail did.
        case thumbnail(LocalAttachment, because: NSEError)
        /// Nothing to attach: the notification shows its text (and why).
        case textOnly(NSEError)

        /// The file to attach, if any.
        public var attachment: LocalAttachment? {
            switch self {
            case let .attachment(attachment), let .thumbnail(attachment, _): attachment
            case .textOnly: nil
            }
        }

        /// Why the attachment itself is missing, if it is.
        public var error: NSEError? {
            switch self {
            case .attachment: nil
            case let .thumbnail(_, error), let .textOnly(error): error
            }
        }
    }

    /// What `init` found in the payload.
    enum Plan {
        case download(url: URL, descriptor: PushMediaDescriptor?)
        case nothing(NSEError)
    }

    private enum Leg {
        case idle
        case running(FileDownload)
        case done(LocalAttachment)
        case failed(NSEError)
    }

    public let configuration: Configuration
    let plan: Plan

    private let lock = NSLock()
    private var deliver: DeliverOnce<Outcome>?
    private var started = false
    private var resolved = false
    private var main: Leg = .idle
    private var thumb: Leg = .idle
    private var timers: [DispatchWorkItem] = []
    private var deadline = Date.distantFuture

    /// Reads the descriptor and the media URL of `userInfo` (nothing is downloaded yet).
    public init(userInfo: [AnyHashable: Any], configuration: Configuration = Configuration()) {
        self.configuration = configuration
        do throws(NSEError) {
            let descriptor = try PushMediaDescriptor.read(from: userInfo)
            if let descriptor, !descriptor.status.hasAttachment {
                plan = .nothing(.rejectedByServer(reason: descriptor.reason ?? descriptor.status.rawValue))
            } else if let candidate = try MediaURLLocator.attachmentURL(in: userInfo, descriptor: descriptor) {
                plan = .download(url: candidate.url, descriptor: descriptor)
            } else {
                plan = .nothing(.noMedia)
            }
        } catch {
            plan = .nothing(error)
        }
    }

    /// A loader of `url`, a reference found beforehand (one item of a descriptor with several).
    init(url: URL, descriptor: PushMediaDescriptor?, configuration: Configuration) {
        self.configuration = configuration
        plan = .download(url: url, descriptor: descriptor)
    }

    /// The descriptor read from the payload (nil when it had none or it was invalid).
    public var descriptor: PushMediaDescriptor? {
        if case let .download(_, descriptor) = plan { return descriptor }
        return nil
    }

    /// Starts the downloads; `completion` is called exactly once, on some thread (at once when
    /// there is nothing to download). A second `start` is ignored.
    public func start(_ completion: @escaping (Outcome) -> Void) {
        let deliver = DeliverOnce(completion)
        let now = Date()
        lock.lock()
        guard !started else { return lock.unlock() }
        started = true
        if resolved {
            // expire() came first: the time is up before anything started.
            lock.unlock()
            deliver(.textOnly(.expired))
            return
        }
        self.deliver = deliver
        deadline = now.addingTimeInterval(max(0, configuration.timeLimit - configuration.reserve))
        lock.unlock()

        guard case let .download(url, descriptor) = plan else {
            if case let .nothing(error) = plan { resolve(.textOnly(error)) }
            return
        }
        do {
            try FileManager.default.createDirectory(at: configuration.directory, withIntermediateDirectories: true)
        } catch {
            return resolve(.textOnly(.file(path: configuration.directory.path, message: "\(error)")))
        }
        // The attachment's own time: its size at the slowest acceptable speed, within the deadline.
        var attachmentDeadline = deadline
        if let bytes = descriptor?.bytes {
            let expected = configuration.firstByteAllowance + Double(bytes) / max(1, configuration.minimumThroughput)
            attachmentDeadline = min(deadline, now.addingTimeInterval(expected))
        }
        let download = FileDownload(
            url: url,
            expectation: .init(
                type: descriptor?.type, bytes: descriptor?.bytes, maxRedirects: configuration.maxRedirects),
            directory: configuration.directory, deadline: attachmentDeadline
        ) { [self] result in
            finished(
                leg: \.main,
                result.map {
                    LocalAttachment(
                        file: $0, options: descriptor?.options ?? AttachmentOptions(typeHint: $0.type.uti), source: url)
                })
        }
        let overall = DispatchWorkItem { [weak self] in self?.resolveBestAttempt(.expired) }
        var hedge: DispatchWorkItem?
        if descriptor?.thumb != nil {
            hedge = DispatchWorkItem { [weak self] in self?.startThumbnailIfWaiting() }
        }
        lock.lock()
        if resolved { return lock.unlock() }
        main = .running(download)
        timers = [overall] + (hedge.map { [$0] } ?? [])
        lock.unlock()
        DispatchQueue.global().asyncAfter(deadline: .now() + deadline.timeIntervalSince(now), execute: overall)
        if let hedge {
            DispatchQueue.global().asyncAfter(
                deadline: .now() + attachmentDeadline.timeIntervalSince(now) / 2, execute: hedge)
        }
        download.start()
    }

    /// Whether `start` has been called.
    public var hasStarted: Bool {
        lock.lock()
        defer { lock.unlock() }
        return started
    }

    /// Whether the thumbnail has arrived, not reported yet.
    var holdsThumbnail: Bool {
        lock.lock()
        defer { lock.unlock() }
        if case .done = thumb { return true }
        return false
    }

    /// The best attempt, now: the thumbnail if it has arrived, else the text. Call it from
    /// `serviceExtensionTimeWillExpire`; the completion runs before this returns (unless it
    /// already ran).
    public func expire() {
        resolveBestAttempt(.expired)
    }

    // MARK: The two downloads

    private func finished(
        leg: ReferenceWritableKeyPath<AttachmentLoader, Leg>, _ result: Result<LocalAttachment, NSEError>
    ) {
        var outcome: Outcome?
        var startThumb = false
        lock.lock()
        if resolved {
            lock.unlock()
            if case let .success(attachment) = result {
                try? FileManager.default.removeItem(at: attachment.file.fileURL)
            }
            return
        }
        switch result {
        case let .success(attachment): self[keyPath: leg] = .done(attachment)
        case let .failure(error): self[keyPath: leg] = .failed(error)
        }
        switch (main, thumb) {
        case let (.done(attachment), _):
            outcome = .attachment(attachment)
        case let (.failed(error), .done(thumbnail)):
            outcome = .thumbnail(thumbnail, because: error)
        case (.failed, .idle):
            if case .download(_, let descriptor) = plan, descriptor?.thumb != nil, Date() < deadline {
                startThumb = true
            } else if case let .failed(error) = main {
                outcome = .textOnly(error)
            }
        case let (.failed(error), .failed):
            outcome = .textOnly(error)
        default:
            break  // the other download is still running
        }
        lock.unlock()
        if let outcome { resolve(outcome) }
        if startThumb { startThumbnail() }
    }

    private func startThumbnailIfWaiting() {
        lock.lock()
        let waiting = !resolved && { if case .running = main { return true } else { return false } }()
        lock.unlock()
        if waiting { startThumbnail() }
    }

    private func startThumbnail() {
        guard case let .download(_, descriptor?) = plan, let url = descriptor.thumb else { return }
        let download = FileDownload(
            url: url, expectation: .init(type: .jpeg, bytes: nil, maxRedirects: configuration.maxRedirects),
            directory: configuration.directory, deadline: deadline
        ) { [self] result in
            finished(
                leg: \.thumb,
                result.map { LocalAttachment(file: $0, options: descriptor.thumbnailOptions, source: url) })
        }
        lock.lock()
        guard !resolved, case .idle = thumb else { return lock.unlock() }
        thumb = .running(download)
        lock.unlock()
        download.start()
    }

    // MARK: Reporting

    private func resolveBestAttempt(_ reason: NSEError) {
        lock.lock()
        var outcome: Outcome = .textOnly(reason)
        var mainError: NSEError = reason
        if case let .failed(error) = main { mainError = error }
        if case let .done(attachment) = main {
            outcome = .attachment(attachment)
        } else if case let .done(thumbnail) = thumb {
            outcome = .thumbnail(thumbnail, because: mainError)
        } else {
            outcome = .textOnly(mainError)
        }
        lock.unlock()
        resolve(outcome)
    }

    /// Reports `outcome` (the first call only), stops what still runs and removes unused files.
    private func resolve(_ outcome: Outcome) {
        lock.lock()
        if resolved { return lock.unlock() }
        resolved = true
        let legs = [main, thumb]
        main = .idle
        thumb = .idle
        let timers = self.timers
        let deliver = self.deliver
        self.timers = []
        self.deliver = nil
        lock.unlock()
        for timer in timers { timer.cancel() }
        for leg in legs {
            switch leg {
            case let .running(download): download.cancel()
            case let .done(attachment) where attachment != outcome.attachment:
                try? FileManager.default.removeItem(at: attachment.file.fileURL)
            default: break
            }
        }
        deliver?(outcome)
    }
}
