import Testing

@testable import PushMedia

/// `PlatformProfile.decide`, the decision table of docs/how-it-works.md "Platform profiles", called directly:
/// for each profile, which sniffed formats, sizes and headers pass through byte for byte, which are
/// transcoded (and by which rule) and which are rejected (and with which reason).
@Suite("Platform profile decisions")
struct PlatformProfileTests {
    /// What `decide` should answer: a transcode names its rule by a word of its `why`, a
    /// rejection by its reason code.
    enum Expected: Sendable, CustomStringConvertible {
        case passthrough
        case transcode(rule: String)
        case reject(reason: String)

        var description: String {
            switch self {
            case .passthrough: "passthrough"
            case let .transcode(rule): "transcode (\(rule))"
            case let .reject(reason): "reject (\(reason))"
            }
        }
    }

    /// One row: a profile, a sniffed source and what `decide` should answer.
    struct Case: Sendable, CustomTestStringConvertible {
        var profile: PlatformProfile
        var format: MediaFormat
        var bytes: Int64
        /// Width, height, frames and EXIF orientation of the image header; nil: no header read.
        var header: (width: Int, height: Int, frames: Int, orientation: Int)?
        /// What the transcoder answers for the animation (`Transcoder.keepsAnimation`).
        var keepsAnimation = false
        var expected: Expected

        var testDescription: String {
            let size = header.map { " \($0.width)×\($0.height)" + ($0.frames > 1 ? " \($0.frames) frames" : "") } ?? ""
            return "\(profile.id): \(format.id)\(size), \(bytes) bytes → \(expected)"
        }
    }

    static let mb: Int64 = 1_000_000

    static func image(
        _ profile: PlatformProfile, _ format: MediaFormat, _ width: Int, _ height: Int,
        bytes: Int64 = 200_000, frames: Int = 1, orientation: Int = 1, keepsAnimation: Bool = false,
        _ expected: Expected
    ) -> Case {
        Case(
            profile: profile, format: format, bytes: bytes, header: (width, height, frames, orientation),
            keepsAnimation: keepsAnimation, expected: expected)
    }

    static func file(_ profile: PlatformProfile, _ format: MediaFormat, bytes: Int64, _ expected: Expected) -> Case {
        Case(profile: profile, format: format, bytes: bytes, header: nil, expected: expected)
    }

    /// Apple's rules: JPEG, PNG, GIF up to 10 MB, long edge 2048 (the default `--long-edge`),
    /// any shape, animations kept; AIFF, WAV, MP3, M4A up to 5 MB; MPEG, MP4, AVI up to 50 MB;
    /// other audio and video transcoded.
    static let ios: [Case] = [
        image(.ios, .jpeg, 1024, 768, .passthrough),
        image(.ios, .png, 800, 600, bytes: 3 * mb, .passthrough),
        image(.ios, .jpeg, 2048, 1536, .passthrough),
        image(.ios, .jpeg, 300, 2048, .passthrough),  // any shape
        image(.ios, .jpeg, 4032, 3024, bytes: 3 * mb, .transcode(rule: "long edge")),
        image(.ios, .jpeg, 1536, 2049, orientation: 6, .transcode(rule: "long edge")),  // upright 2049×1536
        image(.ios, .jpeg, 1024, 768, bytes: 10 * mb, .passthrough),
        image(.ios, .jpeg, 1024, 768, bytes: 10 * mb + 1, .transcode(rule: "image cap")),
        image(.ios, .gif, 400, 300, frames: 12, keepsAnimation: true, .passthrough),
        image(.ios, .gif, 400, 300, frames: 500, keepsAnimation: false, .transcode(rule: "first frame")),
        image(.ios, .png, 400, 300, frames: 3, keepsAnimation: true, .transcode(rule: "first frame")),  // animated PNG
        image(.ios, .webp, 800, 600, .transcode(rule: "WEBP is not shown")),
        image(.ios, .heic, 800, 600, .transcode(rule: "HEIC is not shown")),
        image(.ios, .avif, 800, 600, .transcode(rule: "AVIF is not shown")),
        image(.ios, .bmp, 800, 600, .transcode(rule: "BMP is not shown")),
        file(.ios, .mp3, bytes: 2 * mb, .passthrough),
        file(.ios, .mp3, bytes: 5 * mb, .passthrough),
        file(.ios, .mp3, bytes: 5 * mb + 1, .transcode(rule: "5000000-byte cap for audio")),
        file(.ios, .m4a, bytes: 2 * mb, .passthrough),
        file(.ios, .wav, bytes: 2 * mb, .passthrough),
        file(.ios, .aiff, bytes: 2 * mb, .passthrough),
        file(.ios, .ogg, bytes: 2 * mb, .transcode(rule: "not a audio type")),
        file(.ios, .mp4, bytes: 20 * mb, .passthrough),
        file(.ios, .mp4, bytes: 50 * mb, .passthrough),
        file(.ios, .mp4, bytes: 50 * mb + 1, .transcode(rule: "50000000-byte cap for video")),
        file(.ios, .mpeg, bytes: 20 * mb, .passthrough),
        file(.ios, .avi, bytes: 20 * mb, .passthrough),
        file(.ios, .quicktime, bytes: 20 * mb, .transcode(rule: "not a video type")),
        file(.ios, .webm, bytes: 20 * mb, .transcode(rule: "not a video type")),
        file(.ios, .webm, bytes: 150 * mb, .transcode(rule: "not a video type")),
    ]

    /// FCM on Android: JPEG, PNG, BMP up to 1 MB, 2:1 (within 1 %) and at most 1440×720, first
    /// frame of animations; no audio or video (the pipeline then sends a video's poster frame).
    static let android: [Case] = [
        image(.android, .jpeg, 1440, 720, .passthrough),
        image(.android, .png, 1000, 500, .passthrough),
        image(.android, .bmp, 1440, 720, .passthrough),
        image(.android, .jpeg, 1005, 500, .passthrough),  // 2.01:1, within 1 %
        image(.android, .jpeg, 1030, 500, .transcode(rule: "2:1 shape")),
        image(.android, .jpeg, 800, 600, .transcode(rule: "2:1 shape")),
        image(.android, .jpeg, 720, 1440, orientation: 6, .passthrough),  // upright 1440×720
        image(.android, .jpeg, 1440, 720, orientation: 6, .transcode(rule: "2:1 shape")),  // upright 720×1440
        image(.android, .jpeg, 2880, 1440, .transcode(rule: "long edge")),
        image(.android, .jpeg, 1440, 720, bytes: mb, .passthrough),
        image(.android, .jpeg, 1440, 720, bytes: mb + 1, .transcode(rule: "image cap")),
        image(.android, .jpeg, 4032, 3024, bytes: 15 * mb, .transcode(rule: "image cap")),
        image(.android, .gif, 1440, 720, .transcode(rule: "GIF is not shown")),
        image(.android, .webp, 1440, 720, .transcode(rule: "WEBP is not shown")),
        image(.android, .heic, 1440, 720, .transcode(rule: "HEIC is not shown")),
        image(.android, .png, 1440, 720, frames: 3, keepsAnimation: true, .transcode(rule: "first frame")),
        file(.android, .mp3, bytes: 2 * mb, .reject(reason: "unsupported_type")),
        file(.android, .m4a, bytes: 2 * mb, .reject(reason: "unsupported_type")),
        file(.android, .wav, bytes: 2 * mb, .reject(reason: "unsupported_type")),
        file(.android, .mp4, bytes: 20 * mb, .reject(reason: "unsupported_type")),
        file(.android, .quicktime, bytes: 20 * mb, .reject(reason: "unsupported_type")),
        file(.android, .webm, bytes: 20 * mb, .reject(reason: "unsupported_type")),
    ]

    /// Huawei Push Kit: JPEG or PNG under 512 KB (511,999 bytes), 2:1, at most 1024×512; no audio
    /// or video.
    static let huawei: [Case] = [
        image(.huawei, .jpeg, 1024, 512, bytes: 511_999, .passthrough),
        image(.huawei, .jpeg, 1024, 512, bytes: 512_000, .transcode(rule: "image cap")),
        image(.huawei, .png, 800, 400, .passthrough),
        image(.huawei, .jpeg, 1440, 720, .transcode(rule: "long edge")),
        image(.huawei, .jpeg, 800, 600, .transcode(rule: "2:1 shape")),
        image(.huawei, .bmp, 1024, 512, .transcode(rule: "BMP is not shown")),
        image(.huawei, .gif, 1024, 512, .transcode(rule: "GIF is not shown")),
        image(.huawei, .webp, 1024, 512, .transcode(rule: "WEBP is not shown")),
        file(.huawei, .mp3, bytes: 100_000, .reject(reason: "unsupported_type")),
        file(.huawei, .mp4, bytes: 100_000, .reject(reason: "unsupported_type")),
    ]

    /// Web Push: JPEG, PNG, GIF (first frame) up to 1 MB, 2:1, at most 1440×720; no audio or video.
    static let web: [Case] = [
        image(.web, .jpeg, 1440, 720, .passthrough),
        image(.web, .png, 1200, 600, .passthrough),
        image(.web, .gif, 1440, 720, .passthrough),
        // Even when the transcoder could keep the frames, the profile keeps only the first.
        image(.web, .gif, 1440, 720, frames: 12, keepsAnimation: true, .transcode(rule: "first frame")),
        image(.web, .jpeg, 1440, 720, bytes: mb + 1, .transcode(rule: "image cap")),
        image(.web, .jpeg, 1920, 960, .transcode(rule: "long edge")),
        image(.web, .jpeg, 1000, 1000, .transcode(rule: "2:1 shape")),
        image(.web, .bmp, 1440, 720, .transcode(rule: "BMP is not shown")),
        image(.web, .heic, 1440, 720, .transcode(rule: "HEIC is not shown")),
        file(.web, .m4a, bytes: 100_000, .reject(reason: "unsupported_type")),
        file(.web, .mp4, bytes: 100_000, .reject(reason: "unsupported_type")),
    ]

    @Test("the decision table", arguments: ios + android + huawei + web)
    func decides(_ row: Case) {
        let sniff = SniffResult(format: row.format, magicMIME: row.format.mime, description: "test")
        let header = row.header.map {
            ImageHeader(
                width: $0.width, height: $0.height, frames: $0.frames, hasAlpha: false,
                orientation: $0.orientation, loader: "test")
        }
        // The long edge the pipeline passes: the profile's own, within the configured 2048.
        let longEdge = row.profile.longEdge.map { min($0, 2048) } ?? 2048
        let decision = row.profile.decide(
            sniff, bytes: row.bytes, header: header, longEdge: longEdge,
            keepsAnimation: row.keepsAnimation)
        switch (row.expected, decision) {
        case (.passthrough, .passthrough):
            break
        case let (.transcode(rule), .transcode(why)):
            #expect(why.contains(rule), "\(why)")
        case let (.reject(reason), .reject(actual, message)):
            #expect(actual == reason, "\(message)")
            #expect(message.contains("notifications show no \(row.format.kind.rawValue)"), "\(message)")
        default:
            Issue.record("expected \(row.expected), decided \(decision)")
        }
    }

    @Test func unsupportedBytesAreRejectedEverywhere() {
        let html = SniffResult(
            format: .unsupported(mime: "text/html"), magicMIME: "text/html",
            description: "HTML document")
        for profile in [PlatformProfile.ios, .android, .huawei, .web] {
            guard case let .reject(reason, message) = profile.decide(html, bytes: 1_000) else {
                Issue.record("\(profile.id): HTML not rejected")
                continue
            }
            #expect(reason == "unsupported_type")
            #expect(message.contains("text/html"))
        }
    }

    @Test func imagesLibvipsCannotDecodeAreRejectedAndUnreadHeadersAskForATranscode() {
        let psd = MediaFormat(
            id: "psd", mime: "image/vnd.adobe.photoshop", uti: nil, fileExtension: "psd",
            kind: .image, decodable: false)
        let sniffed = SniffResult(format: psd, magicMIME: psd.mime, description: "Adobe Photoshop Image")
        let message = "image/vnd.adobe.photoshop images cannot be decoded with libvips' trusted loaders"
        let decision = PlatformProfile.ios.decide(sniffed, bytes: 1_000)
        #expect(decision == .reject(reason: "unsupported_type", message: message))
        // Before the header is read (the pipeline's first call), an image is never passed through.
        let jpeg = SniffResult(format: .jpeg, magicMIME: "image/jpeg", description: "JPEG image data")
        for profile in [PlatformProfile.ios, .android, .huawei, .web] {
            #expect(profile.decide(jpeg, bytes: 1_000) == .transcode(why: "no header"), "\(profile.id)")
        }
    }

    @Test func everyProfileIsInTheTableByItsName() {
        #expect(PlatformProfile.profiles.keys.sorted() == ["android", "huawei", "ios", "web"])
        for (name, profile) in PlatformProfile.profiles { #expect(profile.id == name) }
    }
}
