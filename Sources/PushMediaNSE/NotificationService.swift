// The Apple-only part: UserNotifications types around the platform-independent loader.
#if canImport(UserNotifications)
    import CoreGraphics
    import Foundation
    import UserNotifications

    extension AttachmentOptions.Keys {
        /// UserNotifications' option keys.
        public static var userNotifications: AttachmentOptions.Keys {
            AttachmentOptions.Keys(
                typeHint: UNNotificationAttachmentOptionsTypeHintKey,
                clippingRect: UNNotificationAttachmentOptionsThumbnailClippingRectKey,
                thumbnailHidden: UNNotificationAttachmentOptionsThumbnailHiddenKey,
                thumbnailTime: UNNotificationAttachmentOptionsThumbnailTimeKey)
        }
    }

    extension AttachmentLoader.LocalAttachment {
        /// The file as a `UNNotificationAttachment` with the descriptor's options. The system moves
        /// the file into its own store.
        public func notificationAttachment(identifier: String = "pushmedia") throws -> UNNotificationAttachment {
            let options = options.dictionary(keys: .userNotifications) { clip in
                CGRect(x: clip.x, y: clip.y, width: clip.width, height: clip.height).dictionaryRepresentation
            }
            return try UNNotificationAttachment(identifier: identifier, url: file.fileURL, options: options)
        }
    }

    /// One notification's content, with PushMedia's attachments when they arrive in time (every
    /// usable reference of a descriptor with several, in its order). The content handler is
    /// called exactly once: with the attachments, the thumbnail, or the original content.
    ///
    /// ```swift
    /// let loader = NotificationContentLoader(request: request, contentHandler: contentHandler)
    /// loader.start()
    /// // in serviceExtensionTimeWillExpire():
    /// loader.expire()
    /// ```
    public final class NotificationContentLoader: @unchecked Sendable {
        private let request: UNNotificationRequest
        private let loader: AttachmentGroupLoader
        private let deliver: DeliverOnce<UNNotificationContent>

        public init(
            request: UNNotificationRequest,
            configuration: AttachmentLoader.Configuration = AttachmentLoader.Configuration(),
            contentHandler: @escaping (UNNotificationContent) -> Void
        ) {
            self.request = request
            loader = AttachmentGroupLoader(userInfo: request.content.userInfo, configuration: configuration)
            deliver = DeliverOnce(contentHandler)
        }

        /// Downloads and attaches. `prepare` may still change the content (and sees what happened)
        /// just before it is handed over.
        public func start(prepare: ((UNMutableNotificationContent, AttachmentLoader.Outcome) -> Void)? = nil) {
            guard let content = request.content.mutableCopy() as? UNMutableNotificationContent else {
                deliver(request.content)
                return
            }
            let deliver = self.deliver
            loader.start { report in
                var attachments: [UNNotificationAttachment] = []
                for (index, attachment) in report.attachments.enumerated() {
                    do {
                        let identifier = index == 0 ? "pushmedia" : "pushmedia-\(index)"
                        attachments.append(try attachment.notificationAttachment(identifier: identifier))
                    } catch {
                        try? FileManager.default.removeItem(at: attachment.file.fileURL)
                    }
                }
                if !attachments.isEmpty { content.attachments = attachments }
                prepare?(content, report.primary)
                deliver(content)
            }
        }

        /// The best attempt, now (the thumbnail if it has arrived, else the original content). Call
        /// it from `serviceExtensionTimeWillExpire`.
        public func expire() {
            loader.expire()
            // A started loader has reported by now (or is building the content on another thread:
            // that delivery is the one). One that never started leaves the original text to go out.
            if !loader.hasStarted { deliver(request.content) }
        }
    }

    /// A complete Notification Service Extension: name it (or a subclass) as the extension's
    /// `NSExtensionPrincipalClass` and PushMedia's attachments appear. Override `configuration` or
    /// `prepare(_:outcome:)` to adjust.
    open class PushMediaNotificationService: UNNotificationServiceExtension {
        private var current: NotificationContentLoader?

        /// Download settings; the defaults suit the system's 30 s.
        open var configuration: AttachmentLoader.Configuration { AttachmentLoader.Configuration() }

        /// Called just before the content is handed over (any thread).
        open func prepare(_ content: UNMutableNotificationContent, outcome: AttachmentLoader.Outcome) {}

        open override func didReceive(
            _ request: UNNotificationRequest,
            withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void
        ) {
            let loader = NotificationContentLoader(
                request: request, configuration: configuration, contentHandler: contentHandler)
            current = loader
            loader.start { [weak self] content, outcome in self?.prepare(content, outcome: outcome) }
        }

        open override func serviceExtensionTimeWillExpire() {
            current?.expire()
        }
    }
#endif
