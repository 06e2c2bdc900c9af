import Foundation
import PushMedia

// media: libmagic sniff + libvips header probe (and small decodes) over arbitrary bytes.
extension FuzzTargets {
    /// Sniffs `data` with libmagic; for a decodable image, writes it to a file and reads its header
    /// with libvips (pixel cap, loader allow-list), and decodes it whole when it is small (the
    /// thumbnail); decodes BMPs with `BMPDecoder` and converts the small ones to TIFF.
    public static func media(_ data: [UInt8]) {
        let sniffed = Sniffer.sniff(data[...])
        precondition(!sniffed.magicMIME.isEmpty && !sniffed.description.isEmpty, "libmagic gave an empty answer")
        precondition(sniffed.format.kind == .unsupported || sniffed.format.uti != nil, "supported format without UTI")
        OutcomeFeatures.sniffed(sniffed)

        if data.starts(with: [0x42, 0x4D]) { decodeBMP(data) }
        guard sniffed.format.kind == .image, sniffed.format.decodable else { return }

        let path = temporaryFile("input", contents: data)
        defer { unlink(path) }
        if sniffed.format == .bmp { decodeBMP(data) }
        do {
            let header = try transcoder.header(path: path)
            precondition(header.width > 0 && header.height > 0, "header \(header.width)×\(header.height)")
            precondition(header.pixels <= maxPixels, "header over the pixel cap: \(header.pixels)")
            precondition(header.frames >= 1, "header with \(header.frames) frames")
            precondition(Transcoder.allowedLoaders.contains(header.loader), "header from loader \(header.loader)")
            let upright = header.uprightSize
            precondition(upright.width * upright.height == header.width * header.height)
            OutcomeFeatures.header(header)
            // Small images are decoded whole too (the thumbnail), so the decoders behind the
            // header readers are fuzzed as well; big ones would slow every run down.
            if header.pixels <= decodePixels { decodeThumbnail(path, header: header) }
        } catch {
            precondition(!error.description.isEmpty)
            OutcomeFeatures.failed(error)
        }
        if sniffed.format == .bmp { convertBMP(path) }
    }

    /// A small image decoded whole: the thumbnail straight from the file, then the transcode path's
    /// one decode with the thumbnail and the attachment made from it.
    static func decodeThumbnail(_ path: String, header: ImageHeader) {
        do {
            let thumbnail = try transcoder.thumbnail(path: path)
            precondition(thumbnail.format == .jpeg && thumbnail.frames == 1, "thumbnail is \(thumbnail.format.id)")
            precondition(
                thumbnail.width > 0 && thumbnail.height > 0, "thumbnail \(thumbnail.width)×\(thumbnail.height)")
            let upright = header.uprightSize
            precondition(
                thumbnail.width <= max(upright.width, 1) && thumbnail.height <= max(upright.height, 1),
                "thumbnail \(thumbnail.width)×\(thumbnail.height) larger than the image "
                    + "\(upright.width)×\(upright.height)"
            )
            precondition(thumbnail.bytes.starts(with: [0xFF, 0xD8, 0xFF]), "thumbnail is not a JPEG")
            // The transcode path: one decode into memory, then the thumbnail and the attachment from it.
            let decoded = try transcoder.decode(path: path, header: header)
            let small = try transcoder.thumbnail(of: decoded)
            let attachment = try transcoder.attachment(of: decoded)
            precondition(
                small.width <= attachment.width && small.height <= attachment.height,
                "thumbnail larger than the attachment")
            precondition(
                attachment.width <= upright.width && attachment.height <= upright.height,
                "attachment larger than the image")
        } catch {
            precondition(!error.description.isEmpty)
            OutcomeFeatures.failed(error)
        }
    }
}
