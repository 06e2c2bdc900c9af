import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMediaNSE

/// The loader against a real HTTP origin on 127.0.0.1: each way a download goes wrong ends in
/// one outcome, in time, with no file left behind but the one delivered.
@Suite("PushMediaNSE downloads", .serialized)
struct AttachmentLoaderTests {
    let origin: TestOrigin
    let photo = DownloadSamples.bytes.photo
    let png = DownloadSamples.bytes.png

    init() throws {
        origin = try TestOrigin()
        origin.route("/photo.jpg", .file(body: photo, contentType: "image/jpeg"))
        origin.route("/thumb.jpg", .file(body: photo, contentType: "image/jpeg"))
    }

    @Test func downloadsTheAttachmentTheDescriptorDescribes() async throws {
        let directory = TemporaryDirectory()
        let info = try userInfo(
            payload(
                media: origin.url("/photo.jpg"),
                descriptor: descriptorJSON(
                    bytes: photo.count, extra: #""clip":{"X":0.25,"Y":0,"Width":0.5,"Height":1},"hidden":false"#)))
        let (outcome, _) = await load(info, configuration(directory))
        guard case let .attachment(attachment) = outcome else {
            Issue.record("expected the attachment, got \(outcome)")
            return
        }
        #expect(attachment.file.type == .jpeg)
        #expect(attachment.file.fileURL.pathExtension == "jpg")
        #expect(attachment.file.bytes == Int64(photo.count))
        #expect(try Data(contentsOf: attachment.file.fileURL) == Data(photo))
        #expect(
            attachment.options
                == AttachmentOptions(
                    typeHint: "public.jpeg", clip: .init(x: 0.25, y: 0, width: 0.5, height: 1), thumbnailHidden: false))
        let options = attachment.options.dictionary()
        #expect(options["UNNotificationAttachmentOptionsTypeHintKey"] as? String == "public.jpeg")
        #expect(
            options["UNNotificationAttachmentOptionsThumbnailClippingRectKey"] as? [String: Double] == [
                "X": 0.25, "Y": 0, "Width": 0.5, "Height": 1,
            ])
        #expect(options["UNNotificationAttachmentOptionsThumbnailHiddenKey"] as? Bool == false)
        #expect(options["UNNotificationAttachmentOptionsThumbnailTimeKey"] == nil)
        #expect(strayFiles(directory, except: outcome).isEmpty)
        #expect(origin.hits("/thumb.jpg") == 0)
    }

    @Test func withoutADescriptorTheBytesDecideTheExtension() async throws {
        origin.route("/banner", .file(body: png, contentType: "application/octet-stream"))
        let directory = TemporaryDirectory()
        let (outcome, _) = await load(try userInfo(payload(media: origin.url("/banner"))), configuration(directory))
        let attachment = try #require(outcome.attachment, "\(outcome)")
        #expect(outcome.error == nil)
        #expect(attachment.file.type == .png && attachment.file.fileURL.pathExtension == "png")
        #expect(attachment.options == AttachmentOptions(typeHint: "public.png"))
    }

    @Test func followsARedirect() async throws {
        origin.route("/moved", .redirect(to: "/photo.jpg"))
        let directory = TemporaryDirectory()
        let (outcome, _) = await load(
            try userInfo(payload(media: origin.url("/moved"), descriptor: descriptorJSON())), configuration(directory))
        #expect(outcome.attachment?.file.bytes == Int64(photo.count), "\(outcome)")
    }

    @Test func notFoundWithoutAThumbnailShowsTheText() async throws {
        let directory = TemporaryDirectory()
        let (outcome, seconds) = await load(
            try userInfo(payload(media: origin.url("/gone.jpg"), descriptor: descriptorJSON())),
            configuration(directory))
        #expect(outcome == .textOnly(.http(status: 404, url: origin.url("/gone.jpg"))))
        #expect(seconds < 5)
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func notFoundWithAThumbnailShowsTheThumbnail() async throws {
        let directory = TemporaryDirectory()
        let info = try userInfo(
            payload(
                media: origin.url("/gone.jpg"),
                descriptor: descriptorJSON(
                    type: "public.mpeg-4", thumb: origin.url("/thumb.jpg"), extra: #""time":2.5,"hidden":true"#)))
        let (outcome, _) = await load(info, configuration(directory))
        guard case let .thumbnail(thumbnail, because) = outcome else {
            Issue.record("expected the thumbnail, got \(outcome)")
            return
        }
        #expect(because == .http(status: 404, url: origin.url("/gone.jpg")))
        #expect(thumbnail.file.type == .jpeg && thumbnail.file.fileURL.pathExtension == "jpg")
        // A still: the thumbnail keeps the hiding, not the movie's time, and is typed as a JPEG.
        #expect(thumbnail.options == AttachmentOptions(typeHint: "public.jpeg", thumbnailHidden: true))
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func aFileOfAnotherTypeIsRefused() async throws {
        origin.route("/claims-jpeg", .file(body: png, contentType: "image/jpeg"))
        origin.route("/portal", .status(200, body: "<html>Sign in to the Wi-Fi</html>"))
        let directory = TemporaryDirectory()
        let (png, _) = await load(
            try userInfo(payload(media: origin.url("/claims-jpeg"), descriptor: descriptorJSON())),
            configuration(directory))
        #expect(
            png == .textOnly(.wrongType(url: origin.url("/claims-jpeg"), expected: "public.jpeg", found: "public.png")))
        let (html, _) = await load(
            try userInfo(payload(media: origin.url("/portal"), descriptor: descriptorJSON())), configuration(directory))
        guard case let .textOnly(.wrongType(_, expected, found)) = html else {
            Issue.record("expected wrongType, got \(html)")
            return
        }
        #expect(expected == "public.jpeg" && found.hasPrefix("text/html"))
        #expect(strayFiles(directory, except: html).isEmpty)
    }

    @Test func aTruncatedBodyIsRefused() async throws {
        origin.route(
            "/cut.jpg", .declaredLength(photo.count, body: Array(photo.prefix(3000)), contentType: "image/jpeg"))
        let directory = TemporaryDirectory()
        let (outcome, _) = await load(
            try userInfo(payload(media: origin.url("/cut.jpg"), descriptor: descriptorJSON())), configuration(directory)
        )
        #expect(
            outcome == .textOnly(.truncated(url: origin.url("/cut.jpg"), received: 3000, expected: Int64(photo.count))))
        // A complete answer that is shorter than the descriptor says is cut too.
        let (short, _) = await load(
            try userInfo(payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON(bytes: photo.count + 10))),
            configuration(directory))
        #expect(
            short
                == .textOnly(
                    .truncated(
                        url: origin.url("/photo.jpg"), received: Int64(photo.count), expected: Int64(photo.count + 10)))
        )
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func moreBytesThanTheDescriptorSaysAreRefused() async throws {
        // Announced too large: refused before the body.
        let directory = TemporaryDirectory()
        let (announced, _) = await load(
            try userInfo(payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON(bytes: 1000))),
            configuration(directory))
        #expect(announced == .textOnly(.tooLarge(url: origin.url("/photo.jpg"), limit: 1000)))
        // Not announced (an endless body): refused while streaming, as soon as it passes the size.
        origin.route("/endless.jpg", .endless(contentType: "image/jpeg"))
        let (outcome, seconds) = await load(
            try userInfo(payload(media: origin.url("/endless.jpg"), descriptor: descriptorJSON(bytes: 200_000))),
            configuration(directory))
        #expect(outcome == .textOnly(.tooLarge(url: origin.url("/endless.jpg"), limit: 200_000)))
        #expect(seconds < 5)
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func aSlowServerRunsIntoTheDeadline() async throws {
        origin.route("/slow.jpg", .drip(contentType: "image/jpeg", bytesPerSecond: 2000, total: 400_000))
        let directory = TemporaryDirectory()
        let (outcome, seconds) = await load(
            try userInfo(payload(media: origin.url("/slow.jpg"), descriptor: descriptorJSON())),
            configuration(directory, timeLimit: 3, reserve: 0.5))
        switch outcome {
        case .textOnly(.timeout), .textOnly(.expired): break
        default: Issue.record("expected a timeout, got \(outcome)")
        }
        #expect(seconds >= 2 && seconds < 6, "the deadline is 2.5 s after the start; took \(seconds) s")
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func aSlowServerWithAThumbnailShowsTheThumbnail() async throws {
        origin.route("/slow.jpg", .drip(contentType: "image/jpeg", bytesPerSecond: 2000, total: 400_000))
        let directory = TemporaryDirectory()
        let info = try userInfo(
            payload(
                media: origin.url("/slow.jpg"),
                descriptor: descriptorJSON(bytes: 400_000, thumb: origin.url("/thumb.jpg"))))
        let (outcome, seconds) = await load(info, configuration(directory, timeLimit: 3, reserve: 0.5))
        guard case let .thumbnail(thumbnail, because) = outcome else {
            Issue.record("expected the thumbnail, got \(outcome)")
            return
        }
        switch because {
        case .timeout, .expired: break
        default: Issue.record("expected a timeout, got \(because)")
        }
        #expect(thumbnail.file.bytes == Int64(photo.count))
        #expect(origin.hits("/thumb.jpg") == 1)
        #expect(seconds < 6)
        #expect(strayFiles(directory, except: outcome).isEmpty)
    }

    @Test func theDescriptorsSizeSetsTheAttachmentsOwnDeadline() async throws {
        // 2 kB at 16 kB/s plus 0.5 s for the first byte: given up after about 0.6 s, long before
        // the extension's 9.5 s, so the notification is not held up by a stalled server.
        origin.route("/stalled.jpg", .delayed(.seconds(8), body: photo, contentType: "image/jpeg"))
        let directory = TemporaryDirectory()
        var settings = configuration(directory, timeLimit: 10)
        settings.firstByteAllowance = 0.5
        let (outcome, seconds) = await load(
            try userInfo(payload(media: origin.url("/stalled.jpg"), descriptor: descriptorJSON(bytes: 2000))), settings)
        guard case .textOnly(.timeout) = outcome else {
            Issue.record("expected a timeout, got \(outcome)")
            return
        }
        #expect(seconds < 5, "took \(seconds) s")
    }

    @Test func expireDeliversTheBestAttemptAtOnce() async throws {
        origin.route("/slow.jpg", .drip(contentType: "image/jpeg", bytesPerSecond: 2000, total: 400_000))
        let directory = TemporaryDirectory()
        // Without a thumbnail: the text.
        let plain = AttachmentLoader(
            userInfo: try userInfo(payload(media: origin.url("/slow.jpg"), descriptor: descriptorJSON())),
            configuration: configuration(directory, timeLimit: 30))
        let first = Recorder<AttachmentLoader.Outcome>()
        plain.start { first.add($0) }
        #expect(try await eventually { origin.hits("/slow.jpg") > 0 }, "the download never started")
        #expect(first.first == nil)
        plain.expire()
        #expect(first.first == .textOnly(.expired), "the outcome is delivered before expire() returns")
        plain.expire()
        #expect(first.count == 1)

        // With a thumbnail that has arrived: the thumbnail. (The attachment's time is 400 kB
        // at 40 kB/s + 0.2 s: the thumbnail is fetched after half of it, 5.1 s, and has the other
        // half to arrive before the attachment's time runs out and ends the loader by itself.)
        var settings = configuration(directory, timeLimit: 30)
        settings.minimumThroughput = 40_000
        settings.firstByteAllowance = 0.2
        let hedged = AttachmentLoader(
            userInfo: try userInfo(
                payload(
                    media: origin.url("/slow.jpg"),
                    descriptor: descriptorJSON(bytes: 400_000, thumb: origin.url("/thumb.jpg")))),
            configuration: settings)
        let second = Recorder<AttachmentLoader.Outcome>()
        hedged.start { second.add($0) }
        #expect(try await eventually(within: .seconds(15)) { origin.hits("/thumb.jpg") > 0 })
        // Downloaded, checked and handed to the loader.
        let arrived = try await eventually(within: .seconds(4)) { hedged.holdsThumbnail }
        #expect(arrived, "the thumbnail did not arrive")
        #expect(second.first == nil, "nothing is reported before expire()")
        hedged.expire()
        guard case let .thumbnail(_, because)? = second.first else {
            Issue.record("expected the thumbnail, got \(String(describing: second.first))")
            return
        }
        #expect(because == .expired)
        #expect(second.count == 1)
        #expect(strayFiles(directory, except: second.first!).isEmpty)
    }

    @Test func expireBeforeStartStillReportsOnce() async throws {
        let directory = TemporaryDirectory()
        let loader = AttachmentLoader(
            userInfo: try userInfo(payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON())),
            configuration: configuration(directory))
        loader.expire()
        let box = Recorder<AttachmentLoader.Outcome>()
        loader.start { box.add($0) }
        #expect(box.first == .textOnly(.expired) && box.count == 1)
        #expect(origin.hits("/photo.jpg") == 0, "nothing is downloaded")
    }

    @Test func nothingToDownloadIsReportedAtOnce() async throws {
        let directory = TemporaryDirectory()
        let cases: [(String, AttachmentLoader.Outcome)] = [
            (#"{"aps":{"alert":"Hi","mutable-content":1}}"#, .textOnly(.noMedia)),
            (
                payload(
                    media: origin.url("/photo.jpg"), descriptor: #"{"v":1,"status":"rejected","reason":"too_large"}"#),
                .textOnly(.rejectedByServer(reason: "too_large"))
            ),
            (
                payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON(type: "org.webmproject.webp")),
                .textOnly(.unsupportedType("org.webmproject.webp"))
            ),
            (
                payload(
                    media: origin.url("/photo.jpg"),
                    descriptor: descriptorJSON(extra: #""clip":{"X":0.5,"Y":0,"Width":0.8,"Height":1}"#)),
                .textOnly(
                    .invalidDescriptor(
                        field: "clip", problem: "must lie within the unit square (X 0.5, Y 0.0, Width 0.8, Height 1.0)")
                )
            ),
            (
                payload(media: "file:///etc/passwd"),
                .textOnly(.invalidURL(key: "media_url", value: "file:///etc/passwd"))
            ),
        ]
        let before = origin.hits("/photo.jpg")
        for (json, expected) in cases {
            let loader = AttachmentLoader(userInfo: try userInfo(json), configuration: configuration(directory))
            let box = Recorder<AttachmentLoader.Outcome>()
            loader.start { box.add($0) }
            #expect(box.first == expected, "synchronously: \(json)")
        }
        #expect(origin.hits("/photo.jpg") == before)
    }

    /// Many loaders whose download finishes while `expire()` is called from other threads:
    /// each reports exactly once, and only a delivered file remains.
    @Test func raceBetweenTheDownloadAndExpire() async throws {
        let directory = TemporaryDirectory()
        let info = try userInfo(
            payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON(thumb: origin.url("/thumb.jpg"))))
        var delivered: [AttachmentLoader.Outcome] = []
        var reports: [Recorder<AttachmentLoader.Outcome>] = []
        for round in 0..<40 {
            let loader = AttachmentLoader(userInfo: info, configuration: configuration(directory))
            let box = Recorder<AttachmentLoader.Outcome>()
            loader.start { box.add($0) }
            let delay = UInt32(round % 8) * 400
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                usleep(delay)
                loader.expire()
            }
            // The download's own report may still be on its way on another thread.
            let giveUp = Date().addingTimeInterval(5)
            while box.count == 0, Date() < giveUp { usleep(1000) }
            delivered.append(try #require(box.first))
            reports.append(box)
        }
        // Cancelled downloads remove their partial files on their own threads, just after.
        let kept = Set(delivered.compactMap { $0.attachment?.file.fileURL.lastPathComponent })
        var present: Set<String> = []
        try await eventually(within: .seconds(5)) {
            present = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
            return present == kept
        }
        #expect(present == kept, "only delivered files remain")
        // Counted again once the cancelled downloads have cleaned up: a late second report shows.
        #expect(reports.allSatisfy { $0.count == 1 }, "a loader reported twice")
        for outcome in delivered {
            if let attachment = outcome.attachment {
                #expect(FileManager.default.fileExists(atPath: attachment.file.fileURL.path))
            }
        }
    }
}
