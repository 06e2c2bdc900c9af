/// A decoder for Windows bitmaps. libvips reads BMP only through ImageMagick, whose loader is
/// blocked as untrusted, so PushMedia decodes the common forms itself: uncompressed 24- and
/// 32-bit (BI_RGB, or BI_BITFIELDS with byte-aligned masks) and 8-bit paletted, bottom-up or
/// top-down. Every size is checked against the input before it is used.
public enum BMPDecoder {
    public struct Image: Sendable {
        public var width: Int
        public var height: Int
        /// 3 (RGB) or 4 (RGBA).
        public var bands: Int
        public var pixels: [UInt8]
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case truncated
        case unsupported(String)
        case tooManyPixels(width: Int, height: Int)

        public var description: String {
            switch self {
            case .truncated: "BMP data is shorter than its header says"
            case let .unsupported(what): "unsupported BMP variant: \(what)"
            case let .tooManyPixels(w, h): "BMP is \(w)×\(h), over the pixel cap"
            }
        }
    }

    /// Decodes `data`; `maxPixels` is checked from the header before any allocation.
    public static func decode(_ data: [UInt8], maxPixels: Int64) throws(Failure) -> Image {
        func u16(_ at: Int) throws(Failure) -> Int {
            guard at + 2 <= data.count else { throw .truncated }
            return Int(data[at]) | Int(data[at + 1]) << 8
        }
        func u32(_ at: Int) throws(Failure) -> UInt32 {
            guard at + 4 <= data.count else { throw .truncated }
            return UInt32(data[at]) | UInt32(data[at + 1]) << 8 | UInt32(data[at + 2]) << 16 | UInt32(data[at + 3]) << 24
        }
        guard data.count >= 26, data[0] == 0x42, data[1] == 0x4D else { throw .unsupported("missing BM signature") }
        let pixelOffset = Int(try u32(10))
        let headerSize = Int(try u32(14))
        guard [40, 52, 56, 108, 124].contains(headerSize) else { throw .unsupported("header of \(headerSize) bytes") }
        let width = Int(Int32(bitPattern: try u32(18)))
        let rawHeight = Int(Int32(bitPattern: try u32(22)))
        let bitCount = try u16(28)
        let compression = try u32(30)
        let height = abs(rawHeight)
        let topDown = rawHeight < 0
        guard width > 0, height > 0 else { throw .unsupported("\(width)×\(rawHeight) dimensions") }
        guard Int64(width) * Int64(height) <= maxPixels else { throw .tooManyPixels(width: width, height: height) }

        var masks: [UInt32] = [0x00FF_0000, 0x0000_FF00, 0x0000_00FF, 0]
        switch (compression, bitCount) {
        case (0, 24), (0, 32), (0, 8): break
        case (3, 32), (6, 32):
            let maskBase = headerSize >= 52 ? 14 + 40 : 14 + headerSize
            masks = [try u32(maskBase), try u32(maskBase + 4), try u32(maskBase + 8), headerSize >= 56 ? try u32(maskBase + 12) : 0]
            let aligned: Set<UInt32> = [0, 0xFF, 0xFF00, 0xFF_0000, 0xFF00_0000]
            guard masks.allSatisfy(aligned.contains) else { throw .unsupported("non byte-aligned bit masks") }
        default:
            throw .unsupported("\(bitCount)-bit with compression \(compression)")
        }
        let hasAlpha = bitCount == 32 && compression != 0 && masks[3] != 0
        let bands = hasAlpha ? 4 : 3
        let rowBytes = ((width * bitCount + 31) / 32) * 4
        guard pixelOffset >= 14 + headerSize, pixelOffset + rowBytes * height <= data.count else { throw .truncated }

        var palette: [UInt8] = []
        if bitCount == 8 {
            let colours = Int(try u32(46))
            let count = colours == 0 ? 256 : min(colours, 256)
            let base = 14 + headerSize
            guard base + count * 4 <= pixelOffset else { throw .truncated }
            palette = Array(data[base..<base + count * 4])
        }
        let shifts = masks.map { $0 == 0 ? 0 : UInt32($0.trailingZeroBitCount) }

        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        for row in 0..<height {
            let source = pixelOffset + (topDown ? row : height - 1 - row) * rowBytes
            var target = row * width * bands
            for x in 0..<width {
                switch bitCount {
                case 24:
                    let p = source + x * 3
                    pixels[target] = data[p + 2]; pixels[target + 1] = data[p + 1]; pixels[target + 2] = data[p]
                case 32 where compression == 0:
                    let p = source + x * 4
                    pixels[target] = data[p + 2]; pixels[target + 1] = data[p + 1]; pixels[target + 2] = data[p]
                case 32:
                    let p = source + x * 4
                    let value = UInt32(data[p]) | UInt32(data[p + 1]) << 8 | UInt32(data[p + 2]) << 16 | UInt32(data[p + 3]) << 24
                    for band in 0..<bands { pixels[target + band] = UInt8(truncatingIfNeeded: (value & masks[band]) >> shifts[band]) }
                default:
                    let index = Int(data[source + x]) * 4
                    guard index + 2 < palette.count else { throw .unsupported("palette index out of range") }
                    pixels[target] = palette[index + 2]; pixels[target + 1] = palette[index + 1]; pixels[target + 2] = palette[index]
                }
                target += bands
            }
        }
        return Image(width: width, height: height, bands: bands, pixels: pixels)
    }
}
