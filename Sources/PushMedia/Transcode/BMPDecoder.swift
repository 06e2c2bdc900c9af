/// A decoder for Windows and OS/2 bitmaps. libvips reads BMP only through ImageMagick, whose
/// loader is blocked as untrusted, so PushMedia decodes BMP itself, every variant a browser shows:
///
/// - headers: OS/2 1.x (12 bytes), OS/2 2.x (16–64), Windows INFO (40), V2/V3 (52/56), V4 (108), V5 (124);
/// - 1-, 2-, 4- and 8-bit palettes (a palette may have fewer entries than the bit depth allows;
///   an index past its end is black), RLE8 and RLE4 (pixels a delta skips are transparent);
/// - 16-bit (5-5-5 by default, or any bit fields such as 5-6-5), 24-bit, 32-bit (8-8-8 by default,
///   or any bit fields, with alpha when a mask gives one);
/// - bottom-up or top-down rows.
///
/// Every offset and size is checked against the input before it is read, and the pixel cap
/// before anything is allocated (RLE: also at most 1024 pixels per byte of data). Embedded
/// JPEG/PNG and OS/2 Huffman or RLE24 are refused with a clear reason.
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

    /// Compression codes of the Windows headers.
    private enum Compression: UInt32 {
        case rgb = 0
        case rle8 = 1
        case rle4 = 2
        case bitFields = 3
        case jpeg = 4
        case png = 5
        case alphaBitFields = 6
    }

    /// One colour channel's bit field.
    private struct Field {
        let mask: UInt32
        let shift: UInt32
        let bits: UInt32

        init(_ mask: UInt32) throws(Failure) {
            self.mask = mask
            shift = mask == 0 ? 0 : UInt32(mask.trailingZeroBitCount)
            bits = UInt32(mask.nonzeroBitCount)
            // Contiguous: the mask shifted down is all ones.
            guard mask == 0 || (mask >> shift) & ((mask >> shift) &+ 1) == 0 else {
                throw .unsupported("bit field mask \(String(mask, radix: 16)) is not contiguous")
            }
        }

        /// The channel of `pixel`, scaled to 0…255.
        func value(_ pixel: UInt32) -> UInt8 {
            guard bits > 0 else { return 0 }
            let raw = (pixel & mask) >> shift
            if bits >= 8 { return UInt8(truncatingIfNeeded: raw >> (bits - 8)) }
            return UInt8((raw * 255 + ((1 << bits) - 1) / 2) / ((1 << bits) - 1))
        }
    }

    /// Decodes `data`; `maxPixels` is checked from the header before any allocation.
    public static func decode(_ data: [UInt8], maxPixels: Int64) throws(Failure) -> Image {
        func u16(_ at: Int) throws(Failure) -> Int {
            guard at >= 0, at + 2 <= data.count else { throw .truncated }
            return Int(data[at]) | Int(data[at + 1]) << 8
        }
        func u32(_ at: Int) throws(Failure) -> UInt32 {
            guard at >= 0, at + 4 <= data.count else { throw .truncated }
            return UInt32(data[at]) | UInt32(data[at + 1]) << 8 | UInt32(data[at + 2]) << 16 | UInt32(data[at + 3])
                << 24
        }
        guard data.count >= 26, data[0] == 0x42, data[1] == 0x4D else { throw .unsupported("missing BM signature") }
        let pixelOffset = Int(try u32(10))
        let headerSize = Int(try u32(14))

        // The header.
        let width: Int
        let rawHeight: Int
        let bitCount: Int
        var compressionCode: UInt32 = 0
        var coloursUsed = 0
        var paletteEntry = 4
        var masks: [UInt32]?
        var paletteStart = 14 + headerSize
        switch headerSize {
        case 12:
            width = try u16(18)
            rawHeight = Int(Int16(bitPattern: UInt16(try u16(20))))
            bitCount = try u16(24)
            paletteEntry = 3
        case 16...64 where headerSize % 4 == 0, 108, 124:
            width = Int(Int32(bitPattern: try u32(18)))
            rawHeight = Int(Int32(bitPattern: try u32(22)))
            bitCount = try u16(28)
            if headerSize >= 20 { compressionCode = try u32(30) }
            if headerSize >= 36 { coloursUsed = Int(try u32(46)) }
            let os2 = headerSize != 40 && headerSize != 52 && headerSize != 56 && headerSize < 108
            if os2 && (compressionCode == 3 || compressionCode == 4) {
                throw .unsupported(compressionCode == 3 ? "OS/2 Huffman 1D compression" : "OS/2 RLE24 compression")
            }
            if compressionCode == Compression.bitFields.rawValue
                || compressionCode == Compression.alphaBitFields.rawValue
            {
                let withAlpha = compressionCode == Compression.alphaBitFields.rawValue
                if headerSize >= 52 {
                    masks = [try u32(54), try u32(58), try u32(62), headerSize >= 56 ? try u32(66) : 0]
                } else {
                    // INFO header: the masks follow it.
                    masks = [try u32(54), try u32(58), try u32(62), withAlpha ? try u32(66) : 0]
                    paletteStart += withAlpha ? 16 : 12
                }
            }
        default:
            throw .unsupported("header of \(headerSize) bytes")
        }
        guard let compression = Compression(rawValue: compressionCode) else {
            throw .unsupported("compression \(compressionCode)")
        }
        if compression == .jpeg || compression == .png {
            throw .unsupported("an embedded \(compression == .jpeg ? "JPEG" : "PNG")")
        }
        let height = abs(rawHeight)
        let topDown = rawHeight < 0
        guard width > 0, height > 0, width <= 1 << 24, height <= 1 << 24 else {
            throw .unsupported("\(width)×\(rawHeight) dimensions")
        }
        guard Int64(width) * Int64(height) <= maxPixels else { throw .tooManyPixels(width: width, height: height) }

        switch (bitCount, compression) {
        case (1, .rgb), (2, .rgb), (4, .rgb), (8, .rgb), (8, .rle8), (4, .rle4), (24, .rgb), (16, .rgb), (32, .rgb):
            break
        case (16, .bitFields), (32, .bitFields), (16, .alphaBitFields), (32, .alphaBitFields): break
        default: throw .unsupported("\(bitCount)-bit with compression \(compressionCode)")
        }
        if topDown && (compression == .rle8 || compression == .rle4) { throw .unsupported("top-down RLE") }

        // The palette: as many entries as the header says and the file holds before the pixels.
        var palette: [(UInt8, UInt8, UInt8)] = []
        if bitCount <= 8 {
            let wanted = coloursUsed == 0 ? 1 << bitCount : min(coloursUsed, 1 << bitCount)
            let room = max(0, min(pixelOffset, data.count) - paletteStart) / paletteEntry
            let count = min(wanted, room)
            guard count > 0 else { throw .truncated }
            palette.reserveCapacity(count)
            for entry in 0..<count {
                let base = paletteStart + entry * paletteEntry
                palette.append((data[base + 2], data[base + 1], data[base]))
            }
        }
        func colour(_ index: Int) -> (UInt8, UInt8, UInt8) { index < palette.count ? palette[index] : (0, 0, 0) }

        if compression == .rle8 || compression == .rle4 {
            return try decodeRLE(
                data, from: pixelOffset, width: width, height: height, fourBit: compression == .rle4, colour: colour)
        }

        // Uncompressed rows (bit fields included).
        let rowBytes = ((width * bitCount + 31) / 32) * 4
        guard pixelOffset >= 14 + 12, pixelOffset <= data.count, rowBytes * height <= data.count - pixelOffset else {
            throw .truncated
        }
        var fields: [Field]?
        if let masks {
            fields = [try Field(masks[0]), try Field(masks[1]), try Field(masks[2]), try Field(masks[3])]
        } else if bitCount == 16 {
            fields = [try Field(0x7C00), try Field(0x03E0), try Field(0x001F), try Field(0)]
        }
        let hasAlpha = (fields?[3].bits ?? 0) > 0 && bitCount >= 16
        let bands = hasAlpha ? 4 : 3
        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        var anyAlpha = false
        for row in 0..<height {
            let source = pixelOffset + (topDown ? row : height - 1 - row) * rowBytes
            var target = row * width * bands
            for x in 0..<width {
                var rgb: (UInt8, UInt8, UInt8)
                var alpha: UInt8 = 255
                switch bitCount {
                case 24:
                    let p = source + x * 3
                    rgb = (data[p + 2], data[p + 1], data[p])
                case 32 where fields == nil:
                    let p = source + x * 4
                    rgb = (data[p + 2], data[p + 1], data[p])
                case 16, 32:
                    let p = source + x * (bitCount / 8)
                    var value = UInt32(data[p]) | UInt32(data[p + 1]) << 8
                    if bitCount == 32 { value |= UInt32(data[p + 2]) << 16 | UInt32(data[p + 3]) << 24 }
                    let f = fields!
                    rgb = (f[0].value(value), f[1].value(value), f[2].value(value))
                    alpha = f[3].value(value)
                default:
                    let bitOffset = x * bitCount
                    let byte = data[source + bitOffset / 8]
                    let index = Int(byte >> UInt8(8 - bitCount - bitOffset % 8)) & ((1 << bitCount) - 1)
                    rgb = colour(index)
                }
                pixels[target] = rgb.0
                pixels[target + 1] = rgb.1
                pixels[target + 2] = rgb.2
                if hasAlpha {
                    pixels[target + 3] = alpha
                    if alpha != 0 { anyAlpha = true }
                }
                target += bands
            }
        }
        // An alpha mask whose every value is 0 is a writer's habit, not a transparent image.
        if hasAlpha && !anyAlpha {
            for index in stride(from: 3, to: pixels.count, by: 4) { pixels[index] = 255 }
        }
        return Image(width: width, height: height, bands: bands, pixels: pixels)
    }

    /// RLE8/RLE4: runs, absolute runs, end of line, end of bitmap and deltas, bottom-up. Pixels
    /// never written (skipped by a delta or an early end) are transparent; data that ends early
    /// ends the image there, as browsers do.
    private static func decodeRLE(
        _ data: [UInt8], from offset: Int, width: Int, height: Int, fourBit: Bool,
        colour: (Int) -> (UInt8, UInt8, UInt8)
    ) throws(Failure) -> Image {
        guard offset >= 26, offset < data.count else { throw .truncated }
        // A run of 255 pixels takes 2 bytes; more than 1024 pixels a byte is a bomb, not a picture.
        guard Int64(width) * Int64(height) <= Int64(data.count - offset) * 1024 else {
            throw .unsupported("\(data.count - offset) bytes of RLE data for \(width)×\(height) pixels")
        }
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        var x = 0
        var y = 0
        var i = offset
        var complete = true
        func put(_ index: Int) {
            if x < width && y < height {
                let target = ((height - 1 - y) * width + x) * 4
                let rgb = colour(index)
                pixels[target] = rgb.0
                pixels[target + 1] = rgb.1
                pixels[target + 2] = rgb.2
                pixels[target + 3] = 255
            }
            x += 1
        }
        decoding: while y < height, i + 1 < data.count {
            let count = Int(data[i])
            let value = data[i + 1]
            i += 2
            if count > 0 {
                for k in 0..<count {
                    put(fourBit ? Int(k % 2 == 0 ? value >> 4 : value & 0x0F) : Int(value))
                    if x > width { break }
                }
                continue
            }
            switch value {
            case 0:
                x = 0
                y += 1
            case 1:
                break decoding
            case 2:
                guard i + 1 < data.count else { break decoding }
                x += Int(data[i])
                y += Int(data[i + 1])
                i += 2
                complete = false
            default:
                let n = Int(value)
                let bytes = fourBit ? (n + 1) / 2 : n
                guard i + bytes <= data.count else { break decoding }
                for k in 0..<n {
                    let byte = data[i + (fourBit ? k / 2 : k)]
                    put(fourBit ? Int(k % 2 == 0 ? byte >> 4 : byte & 0x0F) : Int(byte))
                }
                i += bytes + (bytes % 2)
            }
        }
        if complete {
            // Every pixel written (the usual case): no alpha needed.
            var opaque = true
            for index in stride(from: 3, to: pixels.count, by: 4) where pixels[index] == 0 {
                opaque = false
                break
            }
            if opaque {
                var rgb = [UInt8](repeating: 0, count: width * height * 3)
                for pixel in 0..<(width * height) {
                    rgb[pixel * 3] = pixels[pixel * 4]
                    rgb[pixel * 3 + 1] = pixels[pixel * 4 + 1]
                    rgb[pixel * 3 + 2] = pixels[pixel * 4 + 2]
                }
                return Image(width: width, height: height, bands: 3, pixels: rgb)
            }
        }
        return Image(width: width, height: height, bands: 4, pixels: pixels)
    }
}
