import Foundation
import PushMedia

// bmp: PushMedia's own BMP decoder, and the conversion of what it decodes.
extension FuzzTargets {
    /// The BMP decoder alone: its invariants on every input, and a small decoded image converts
    /// to a TIFF libvips reads back at the same size.
    public static func bmp(_ data: [UInt8]) {
        decodeBMP(data)
        guard (try? BMPDecoder.decode(data, maxPixels: decodePixels)) != nil else { return }
        let path = temporaryFile("bmp", suffix: ".bmp", contents: data)
        defer { unlink(path) }
        convertBMP(path)
    }

    /// The decoder's invariants on `data` (any bytes; the media target passes what starts with `BM`).
    static func decodeBMP(_ data: [UInt8]) {
        do {
            let image = try BMPDecoder.decode(data, maxPixels: maxPixels)
            precondition(image.width > 0 && image.height > 0, "BMP \(image.width)×\(image.height)")
            precondition(Int64(image.width) * Int64(image.height) <= maxPixels, "BMP over the pixel cap")
            precondition(image.bands == 3 || image.bands == 4, "BMP with \(image.bands) bands")
            precondition(image.pixels.count == image.width * image.height * image.bands, "BMP pixel buffer size")
            // A pixel takes at least one bit of an uncompressed file; RLE expands at most 1024 times.
            precondition(image.width * image.height <= data.count * 1024, "BMP larger than its data allows")
        } catch {
            _ = error.description
        }
    }

    /// A BMP the decoder accepts becomes a TIFF whose header libvips reads back with the same size.
    static func convertBMP(_ path: String) {
        guard let data = FileManager.default.contents(atPath: path),
            let image = try? BMPDecoder.decode(Array(data), maxPixels: maxPixels),
            Int64(image.width) * Int64(image.height) <= decodePixels
        else { return }
        let output = path + ".tiff"
        defer { unlink(output) }
        do {
            try transcoder.convertBMP(path: path, to: output)
            let header = try transcoder.header(path: output)
            precondition(
                header.width == image.width && header.height == image.height,
                "BMP \(image.width)×\(image.height) became a \(header.width)×\(header.height) TIFF")
            precondition(header.hasAlpha == (image.bands == 4), "BMP alpha lost or invented")
        } catch {
            preconditionFailure("a BMP that decodes did not convert: \(error)")
        }
    }
}
