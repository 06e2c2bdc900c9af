import Foundation
import PushMedia
import PushMediaNSE
import PushMediaTestSupport
import Testing

/// The phone side reads what the server writes: the descriptor's fields, the attachment types
/// and caps, and the first bytes of every sample.
@Suite("PushMediaNSE descriptor and types")
struct DescriptorTests {
    @Test func readsEveryFieldTheServerWrites() throws {
        var descriptor = Descriptor(
            status: .processed, type: "public.mpeg-4", mime: "video/mp4", bytes: 1_234_567, width: 1280, height: 720,
            thumb: "https://media.shop.example/6f11.jpg",
            hints: ThumbnailHints(clip: ClipRect(x: 0.125, y: 0, width: 0.75, height: 1), hidden: false, time: 2.5))
        descriptor.items = [
            .init(path: "att.id1", status: .processed, type: "public.mpeg-4"),
            .init(path: "att.id2", status: .rejected, type: nil),
        ]
        let json = String(decoding: descriptor.json(omitting: []).serialized(), as: UTF8.self)
        let read = try #require(try PushMediaDescriptor.read(from: userInfo(#"{"pushmedia":\#(json)}"#)))
        #expect(read.version == 1 && read.status == .processed && read.type == .mp4)
        #expect(read.bytes == 1_234_567 && read.width == 1280 && read.height == 720)
        #expect(read.thumb == URL(string: "https://media.shop.example/6f11.jpg"))
        #expect(read.clip == .init(x: 0.125, y: 0, width: 0.75, height: 1))
        #expect(read.hidden == false && read.time == 2.5 && read.frame == nil)
        #expect(
            read.items.map(\.path) == ["att.id1", "att.id2"] && read.items.map(\.status) == [.processed, .rejected])
        #expect(
            read.options
                == AttachmentOptions(
                    typeHint: "public.mpeg-4", clip: .init(x: 0.125, y: 0, width: 0.75, height: 1),
                    thumbnailHidden: false, thumbnailTime: .seconds(2.5)))

        // An animation's frame, and a descriptor the server shortened to fit 4096 bytes.
        let gif = Descriptor(status: .passthrough, type: "com.compuserve.gif", hints: ThumbnailHints(frame: 3))
        let frame = try #require(
            try PushMediaDescriptor.read(
                from: userInfo(
                    #"{"pushmedia":\#(String(decoding: gif.json(omitting: []).serialized(), as: UTF8.self))}"#)))
        #expect(frame.options.thumbnailTime == .frame(3))
        let minimal = try #require(
            try PushMediaDescriptor.read(
                from: userInfo(
                    #"{"pushmedia":\#(String(decoding: descriptor.json(omitting: Set(Descriptor.optionalFields)).serialized(), as: UTF8.self))}"#
                )))
        #expect(
            minimal.type == nil && minimal.bytes == nil && minimal.thumb == nil && minimal.items.isEmpty
                && minimal.options == AttachmentOptions())
    }

    @Test func namesTheFieldThatIsWrong() throws {
        let cases: [(String, NSEError)] = [
            (#""a string""#, .invalidDescriptor(field: "pushmedia", problem: "is not an object")),
            (#"{"status":"processed"}"#, .invalidDescriptor(field: "v", problem: "must be a version number ≥ 1")),
            (
                #"{"v":1,"status":"done"}"#,
                .invalidDescriptor(
                    field: "status",
                    problem: "\"done\" is not processed, passthrough, best_attempt, rejected or skipped")
            ),
            (#"{"v":1,"status":"processed","type":"public.heic"}"#, .unsupportedType("public.heic")),
            (
                #"{"v":1,"status":"processed","type":"public.jpeg","bytes":20000000}"#,
                .invalidDescriptor(field: "bytes", problem: "20000000 is over the 10000000-byte cap")
            ),
            (
                #"{"v":1,"status":"processed","bytes":-1}"#,
                .invalidDescriptor(field: "bytes", problem: "must be a positive whole number")
            ),
            (
                #"{"v":1,"status":"processed","hidden":"no"}"#,
                .invalidDescriptor(field: "hidden", problem: "must be true or false")
            ),
            (
                #"{"v":1,"status":"processed","hidden":1}"#,
                .invalidDescriptor(field: "hidden", problem: "must be true or false")
            ),
            (
                #"{"v":1,"status":"processed","frame":true}"#,
                .invalidDescriptor(field: "frame", problem: "must be a frame number ≥ 0")
            ),
            (
                #"{"v":1,"status":"processed","time":-2}"#,
                .invalidDescriptor(field: "time", problem: "must be a number of seconds ≥ 0")
            ),
            (
                #"{"v":1,"status":"processed","thumb":"javascript:alert(1)"}"#,
                .invalidDescriptor(field: "thumb", problem: "is not an absolute http(s) URL")
            ),
            (
                #"{"v":1,"status":"processed","clip":{"X":0,"Y":0,"Width":0}}"#,
                .invalidDescriptor(field: "clip", problem: "needs numbers X, Y, Width and Height")
            ),
            (
                #"{"v":1,"status":"processed","items":[{"status":"processed"}]}"#,
                .invalidDescriptor(field: "items[0]", problem: "needs a path")
            ),
        ]
        for (json, expected) in cases {
            #expect(throws: expected, "\(json)") {
                try PushMediaDescriptor.read(from: userInfo(#"{"pushmedia":\#(json)}"#))
            }
        }
        #expect(try PushMediaDescriptor.read(from: userInfo(#"{"aps":{}}"#)) == nil)
        // The message a developer sees names the field.
        #expect(
            NSEError.invalidDescriptor(field: "clip", problem: "needs numbers X, Y, Width and Height").description
                .contains("clip"))
    }

    /// The phone's table of attachment types agrees with the server's iOS profile: the same
    /// UTIs, extensions, MIME types and caps.
    @Test func typesAgreeWithTheServersIOSProfile() throws {
        for format in PlatformProfile.ios.acceptedFormats {
            let uti = try #require(format.uti)
            let type = try #require(AttachmentType.withUTI(uti), "\(uti) is missing on the phone side")
            #expect(type.fileExtension == format.fileExtension, "\(uti)")
            #expect(type.mime == format.mime, "\(uti)")
            #expect(type.maxBytes == PlatformProfile.ios.maxBytes(for: format.kind), "\(uti)")
        }
        for format in [MediaFormat.webp, .heic, .avif, .tiff, .bmp, .webm, .quicktime, .matroska, .flac, .ogg] {
            #expect(AttachmentType.withUTI(format.uti ?? "") == nil, "\(format.id) is not an attachment type")
        }
    }

    /// The first bytes of each sample say its type; formats the phone does not show say nothing.
    @Test func sniffsTheSamples() throws {
        let expected: [String: AttachmentType?] = [
            "photo-exif.jpg": .jpeg, "logo-alpha.png": .png, "spinner.gif": .gif, "really-a-png.jpg": .png,
            "no-extension": .jpeg,
            "chime.mp3": .mp3, "ping.m4a": .m4a, "bell.wav": .wav, "clip.mp4": .mp4,
            "banner.webp": nil, "portrait.heic": nil, "sunset.avif": nil, "scan.tiff": nil, "diagram.bmp": nil,
            "clip.webm": nil,
        ]
        for (name, type) in expected {
            let head = Array(try sampleMedia(name).prefix(AttachmentType.sniffLength))
            #expect(AttachmentType.sniff(head) == type, "\(name)")
        }
        #expect(AttachmentType.mp4.matches(.m4a) && AttachmentType.m4a.matches(.mp4))
        #expect(!AttachmentType.jpeg.matches(.png))
        #expect(AttachmentType.sniff([0xFF, 0xF1, 0x50, 0x80]) == nil, "ADTS AAC is not MP3")
        #expect(
            AttachmentType.jpeg.accepts(contentType: nil)
                && AttachmentType.jpeg.accepts(contentType: "application/octet-stream"))
        #expect(
            AttachmentType.m4a.accepts(contentType: "video/mp4")
                && !AttachmentType.jpeg.accepts(contentType: "text/html; charset=utf-8"))
    }
}
