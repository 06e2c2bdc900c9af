import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMediaNSE

/// Every image of a slider or carousel against a real HTTP origin on 127.0.0.1: downloaded side
/// by side, reported once in the descriptor's order, a failed one reported without the others
/// lost, nothing left behind but the files delivered.
@Suite("PushMediaNSE attachment groups", .serialized)
struct AttachmentGroupLoaderTests {
    let origin: TestOrigin
    let photo = DownloadSamples.bytes.photo
    let png = DownloadSamples.bytes.png

    init() throws {
        origin = try TestOrigin()
    }

    /// A CleverTap slider's items as the server leaves them: the store's URLs at each item's
    /// `imageUrl`, and one descriptor item per reference.
    func slider(_ items: [(url: String, status: String, type: String)]) throws -> [AnyHashable: Any] {
        let entries = items.map { #"{"caption":"c","imageUrl":"\#($0.url)"}"# }
        let described = items.indices.map { index in
            #"{"path":"ct_ContentSlider.items[\#(index)].imageUrl","status":"\#(items[index].status)","type":"\#(items[index].type)"}"#
        }
        return try userInfo(
            #"{"aps":{"alert":{"title":"Slides","body":"New in"},"mutable-content":1,"category":"CTNotification"},"#
                + #""ct_ContentSlider":{"orientation":"landscape","items":[\#(entries.joined(separator: ","))]},"#
                + #""pushmedia":{"v":1,"status":"processed","type":"\#(items[0].type)","items":[\#(described.joined(separator: ","))]}}"#
        )
    }

    func run(_ loader: AttachmentGroupLoader) async -> (AttachmentGroupLoader.Report, TimeInterval) {
        let started = Date()
        let report = await withCheckedContinuation {
            (continuation: CheckedContinuation<AttachmentGroupLoader.Report, Never>) in
            loader.start { continuation.resume(returning: $0) }
        }
        return (report, Date().timeIntervalSince(started))
    }

    func files(_ directory: TemporaryDirectory) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
    }

    @Test func everyUsableItemIsDownloadedSideBySideInItsOrder() async throws {
        origin.route("/one.jpg", .delayed(.milliseconds(1500), body: photo, contentType: "image/jpeg"))
        origin.route("/two.png", .delayed(.milliseconds(1500), body: png, contentType: "image/png"))
        origin.route("/three.jpg", .delayed(.milliseconds(1500), body: photo, contentType: "image/jpeg"))
        let directory = TemporaryDirectory()
        let info = try slider([
            (origin.url("/one.jpg"), "processed", "public.jpeg"),
            (origin.url("/refused.jpg"), "rejected", "public.jpeg"),
            (origin.url("/two.png"), "processed", "public.png"),
            (origin.url("/gone.jpg"), "processed", "public.jpeg"),
            (origin.url("/three.jpg"), "passthrough", "public.jpeg"),
        ])
        let loader = AttachmentGroupLoader(userInfo: info, configuration: configuration(directory))
        #expect(loader.count == 4, "the rejected item is not downloaded")
        let (report, seconds) = await run(loader)
        // One after another, three images of 1.5 s each would take 4.5 s.
        #expect(seconds < 3.5, "took \(seconds) s")
        #expect(report.outcomes.count == 4)
        #expect(report.attachments.map(\.file.type) == [.jpeg, .png, .jpeg])
        #expect(
            report.attachments.map(\.source)
                == ["/one.jpg", "/two.png", "/three.jpg"].map { URL(string: origin.url($0))! })
        #expect(report.outcomes[2] == .textOnly(.http(status: 404, url: origin.url("/gone.jpg"))))
        #expect(report.primary.attachment?.options.typeHint == "public.jpeg")
        #expect(report.attachments[1].options == AttachmentOptions(typeHint: "public.png"))
        #expect(try Data(contentsOf: report.attachments[1].file.fileURL) == Data(png))
        #expect(origin.hits("/refused.jpg") == 0)
        #expect(files(directory) == Set(report.attachments.map(\.file.fileURL.lastPathComponent)))
    }

    @Test func expireReportsWhatHasArrivedAndLeavesNoFile() async throws {
        origin.route("/fast.jpg", .file(body: photo, contentType: "image/jpeg"))
        origin.route("/slow.jpg", .delayed(.seconds(8), body: photo, contentType: "image/jpeg"))
        let directory = TemporaryDirectory()
        let info = try slider([
            (origin.url("/fast.jpg"), "processed", "public.jpeg"),
            (origin.url("/slow.jpg"), "processed", "public.jpeg"),
        ])
        let loader = AttachmentGroupLoader(userInfo: info, configuration: configuration(directory))
        let reports = Recorder<AttachmentGroupLoader.Report>()
        loader.start { reports.add($0) }
        // The fast one's file is in place once it has arrived.
        let until = Date().addingTimeInterval(5)
        while !files(directory).contains(where: { $0.hasSuffix(".jpg") }), Date() < until {
            try await Task.sleep(for: .milliseconds(20))
        }
        loader.expire()
        #expect(reports.count == 1, "the report is delivered before expire() returns")
        let report = try #require(reports.first)
        #expect(report.attachments.map(\.source) == [URL(string: origin.url("/fast.jpg"))!])
        #expect(report.outcomes[1] == .textOnly(.expired))
        loader.expire()
        #expect(reports.count == 1)
        // The slow download was stopped: its partial file is gone, and nothing else comes.
        #expect(files(directory) == Set(report.attachments.map(\.file.fileURL.lastPathComponent)))
    }

    @Test func aPayloadWithOneReferenceIsTheSingleLoaders() async throws {
        origin.route("/photo.jpg", .file(body: photo, contentType: "image/jpeg"))
        let directory = TemporaryDirectory()
        let loader = AttachmentGroupLoader(
            userInfo: try userInfo(payload(media: origin.url("/photo.jpg"), descriptor: descriptorJSON())),
            configuration: configuration(directory))
        #expect(loader.count == 1)
        let (report, _) = await run(loader)
        #expect(report.outcomes.count == 1 && report.primary.attachment?.file.type == .jpeg, "\(report)")
    }

    @Test func anItemThatIsNoURLIsReportedAndTheCountIsCapped() async throws {
        origin.route("/photo.jpg", .file(body: photo, contentType: "image/jpeg"))
        var items = [
            (origin.url("/photo.jpg"), "processed", "public.jpeg"), ("ftp://host/x.jpg", "processed", "public.jpeg"),
        ]
        items += Array(repeating: (origin.url("/photo.jpg"), "processed", "public.jpeg"), count: 20)
        let loader = AttachmentGroupLoader(
            userInfo: try slider(items), configuration: configuration(TemporaryDirectory()))
        #expect(loader.count == AttachmentGroupLoader.maxAttachments)
        let (report, _) = await run(loader)
        #expect(
            report.outcomes[1]
                == .textOnly(.invalidURL(key: "ct_ContentSlider.items[1].imageUrl", value: "ftp://host/x.jpg")))
        #expect(report.attachments.count == AttachmentGroupLoader.maxAttachments - 1)
    }

    @Test func pathsAreReadAsTheServerWritesThem() throws {
        let info = try userInfo(
            #"{"a.b":{"url":["x","y"]},"ct":{"items":[{"imageUrl":"u0"}]},"pt_json":"{\"pt_img1\":\"j\"}","q\"k":"q"}"#)
        #expect(UserInfoPath.value(at: #""a.b".url[1]"#, in: info) as? String == "y")
        #expect(UserInfoPath.value(at: "ct.items[0].imageUrl", in: info) as? String == "u0")
        #expect(UserInfoPath.value(at: "pt_json(json).pt_img1", in: info) as? String == "j")
        #expect(UserInfoPath.value(at: #""q\"k""#, in: info) as? String == "q")
        #expect(UserInfoPath.value(at: "ct.items[3].imageUrl", in: info) == nil)
        for malformed in [
            "", ".ct", "ct.", "ct..items", "[0]", "ct[x]", "ct[-1]", "\"open", "ct]",
            String(repeating: "a.", count: 40) + "a",
        ] {
            #expect(UserInfoPath.parse(malformed) == nil, "\(malformed)")
        }
    }
}
