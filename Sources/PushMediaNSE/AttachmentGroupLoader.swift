import Foundation

/// Every attachment of a notification whose descriptor marks several references usable (a
/// carousel's pages, a slider's items), downloaded side by side within the extension's one time
/// limit, each within Apple's cap for its type. It reports exactly once, with each reference's
/// outcome in the descriptor's order. A payload with one reference gets what `AttachmentLoader`
/// gives (the attachment, its thumbnail, or the text).
///
/// ```swift
/// let loader = AttachmentGroupLoader(userInfo: content.userInfo)
/// loader.start { report in content.attachments = … report.attachments … }
/// loader.expire()   // from serviceExtensionTimeWillExpire: what has arrived, now
/// ```
public final class AttachmentGroupLoader: @unchecked Sendable {
    /// The one report of a group loader.
    public struct Report: Sendable, Equatable {
        /// Each reference's outcome, in the descriptor's order. The first is the notification's
        /// own: the one `AttachmentLoader` reports for the payload, with its thumbnail fallback.
        public var outcomes: [AttachmentLoader.Outcome]

        /// The files to attach, in order (the system shows the first in the notification).
        public var attachments: [AttachmentLoader.LocalAttachment] { outcomes.compactMap(\.attachment) }
        /// The notification's own outcome.
        public var primary: AttachmentLoader.Outcome { outcomes[0] }
    }

    /// The references at most attached together: a template's most pages.
    public static let maxAttachments = 10

    private let loaders: [AttachmentLoader]
    /// The outcomes known when the group was made (a further reference whose value is no URL).
    private let lock = NSLock()
    private var outcomes: [AttachmentLoader.Outcome?]
    private var deliver: DeliverOnce<Report>?
    private var started = false
    private var resolved = false

    /// Reads the payload (nothing is downloaded yet). Every loader shares `configuration`, so
    /// every download ends within the same time limit.
    public init(userInfo: [AnyHashable: Any], configuration: AttachmentLoader.Configuration = .init()) {
        let primary = AttachmentLoader(userInfo: userInfo, configuration: configuration)
        var loaders = [primary]
        var outcomes: [AttachmentLoader.Outcome?] = [nil]
        if case let .download(_, descriptor?) = primary.plan {
            let further = MediaURLLocator.attachmentURLs(
                in: userInfo, descriptor: descriptor, limit: Self.maxAttachments)
            for reference in further.dropFirst() {
                switch reference {
                case let .success(candidate):
                    let item = descriptor.items.first { $0.path == candidate.path }
                    loaders.append(
                        AttachmentLoader(
                            url: candidate.url,
                            descriptor: item.map { PushMediaDescriptor(item: $0, version: descriptor.version) },
                            configuration: configuration))
                    outcomes.append(nil)
                case let .failure(error):
                    outcomes.append(.textOnly(error))
                }
            }
        }
        self.loaders = loaders
        self.outcomes = outcomes
        count = outcomes.count
    }

    /// How many references are attached when they all arrive.
    public let count: Int

    /// Starts every download; `completion` is called exactly once, on some thread. A second
    /// `start` is ignored.
    public func start(_ completion: @escaping (Report) -> Void) {
        lock.lock()
        guard !started else { return lock.unlock() }
        started = true
        deliver = DeliverOnce(completion)
        lock.unlock()
        // Loaders fill the outcomes without a download in order: the places of those that have one.
        let places = outcomes.indices.filter { outcomes[$0] == nil }
        for (loader, place) in zip(loaders, places) {
            loader.start { [self] outcome in arrived(outcome, at: place) }
        }
    }

    /// Whether `start` has been called.
    public var hasStarted: Bool {
        lock.lock()
        defer { lock.unlock() }
        return started
    }

    /// Reports now with what has arrived: each download still running ends as `AttachmentLoader`
    /// ends it at its `expire` (its thumbnail, or the text). The completion runs before this
    /// returns (unless it already ran or `start` was never called).
    public func expire() {
        for loader in loaders { loader.expire() }
        lock.lock()
        let report = resolved || !started ? nil : Report(outcomes: outcomes.map { $0 ?? .textOnly(.expired) })
        resolved = resolved || started
        let deliver = self.deliver
        lock.unlock()
        if let report { deliver?(report) }
    }

    private func arrived(_ outcome: AttachmentLoader.Outcome, at place: Int) {
        lock.lock()
        if resolved {
            lock.unlock()
            // Too late for the report: its file would be left behind.
            if let file = outcome.attachment?.file.fileURL { try? FileManager.default.removeItem(at: file) }
            return
        }
        outcomes[place] = outcome
        let complete = outcomes.allSatisfy { $0 != nil }
        let report = complete ? Report(outcomes: outcomes.compactMap { $0 }) : nil
        resolved = complete
        let deliver = self.deliver
        lock.unlock()
        if let report { deliver?(report) }
    }
}
