/// What to do with fetched media.
public enum MediaDecision: Sendable, Equatable {
    /// Already what the phone accepts: re-host byte for byte.
    case passthrough
    /// To convert (an image with libvips, audio or video with FFmpeg); `why` says which rule asked
    /// for it.
    case transcode(why: String)
    /// Unusable; `reason` is machine-readable, `message` says which rule failed.
    case reject(reason: String, message: String)
}

extension PlatformProfile {
    /// Decides from the sniffed format, the byte size and, for images, the header (without one, a
    /// decodable image is `transcode`: the pipeline reads the header and asks again). Audio and
    /// video pass when the platform takes their type at their size, are transcoded otherwise, and
    /// are rejected (`unsupported_type`) by a platform that shows none. Images: the rules below,
    /// in order (type, byte cap, shape, long edge, animation); the first that fails says why.
    public func decide(
        _ sniff: SniffResult, bytes: Int64, header: ImageHeader? = nil, longEdge: Int = 2048,
        keepsAnimation: Bool = false
    ) -> MediaDecision {
        let format = sniff.format
        switch format.kind {
        case .unsupported:
            return .reject(
                reason: "unsupported_type",
                message:
                    "the bytes are \(sniff.magicMIME) (\(sniff.description)), not an image, audio or video format a "
                    + "notification can show"
            )
        case .audio, .video:
            guard maxBytes(for: format.kind) > 0 else {
                if let delivers {
                    return .reject(
                        reason: "unsupported_type",
                        message: "the source is \(format.kind.rawValue) (\(format.mime)); a .\(delivers.fileExtension) "
                            + "media URL delivers \(delivers.kind.rawValue)")
                }
                return .reject(
                    reason: "unsupported_type",
                    message: "\(source) notifications show no \(format.kind.rawValue) (\(format.mime)); only images")
            }
            guard acceptedFormats.contains(format) else {
                return .transcode(
                    why:
                        "\(format.mime) is not a \(format.kind.rawValue) type \(source) attachments take (audio: "
                        + "AIFF, WAV, MP3, M4A; video: MPEG, MPEG-2, MPEG-4, AVI)"
                )
            }
            let cap = maxBytes(for: format.kind)
            guard bytes <= cap else {
                return .transcode(
                    why:
                        "\(format.kind.rawValue) is \(bytes) bytes, over \(source) \(cap)-byte cap for "
                        + "\(format.kind.rawValue) attachments"
                )
            }
            return .passthrough
        case .image:
            guard maxImageBytes > 0 else {
                let rule =
                    delivers.map { "a .\($0.fileExtension) media URL delivers \($0.kind.rawValue)" }
                    ?? "\(source) notifications show no images"
                return .reject(reason: "unsupported_type", message: "the source is an image (\(format.mime)); \(rule)")
            }
            guard format.decodable else {
                return .reject(
                    reason: "unsupported_type",
                    message: "\(format.mime) images cannot be decoded with libvips' trusted loaders")
            }
            guard let header else { return .transcode(why: "no header") }
            let (width, height) = header.uprightSize
            if !acceptedFormats.contains(format) {
                return .transcode(why: "\(format.id.uppercased()) is not shown by \(id); converting")
            }
            if bytes > maxImageBytes {
                return .transcode(why: "\(bytes) bytes exceed \(source) \(maxImageBytes)-byte image cap")
            }
            if !hasShape(width: width, height: height), let aspect {
                return .transcode(
                    why:
                        "\(width)×\(height) is not the \(id) profile's "
                        + "\(aspect == aspect.rounded() ? String(Int(aspect)) : String(aspect)):1 shape"
                )
            }
            if max(width, height) > longEdge {
                return .transcode(why: "\(width)×\(height) exceeds the \(longEdge) px long edge")
            }
            if header.frames > 1 && (format != .gif || !keepsAnimation || !animation) {
                return .transcode(
                    why: "\(header.frames)-frame animation over the frame or pixel cap; keeping the first frame")
            }
            return .passthrough
        }
    }
}
