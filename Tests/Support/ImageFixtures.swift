import Foundation

/// Image files made by code for the decode tests: every BMP variant, a multi-page TIFF with
/// pages of different sizes, a GIF with a corrupt frame, JPEGs with a broken ICC profile and
/// with an Ultra HDR-style MPF secondary image.
public enum ImageFixtures {
    /// A small test picture: `width`×`height` pixels, each one of `colours` (RGB), by index.
    public struct Picture: Sendable {
        public var width: Int
        public var height: Int
        public var colours: [(UInt8, UInt8, UInt8)]
        /// Row-major, top row first: an index into `colours`.
        public var indices: [Int]

        public init(width: Int, height: Int, colours: [(UInt8, UInt8, UInt8)], indices: [Int]) {
            self.width = width
            self.height = height
            self.colours = colours
            self.indices = indices
        }

        public func rgb(_ x: Int, _ y: Int) -> (UInt8, UInt8, UInt8) { colours[indices[y * width + x]] }

        /// 7×5 (odd sizes exercise row padding), in `count` colours.
        public static func sample(colours count: Int) -> Picture {
            let palette: [(UInt8, UInt8, UInt8)] = [
                (0, 0, 0), (255, 255, 255), (200, 30, 40), (20, 180, 60), (30, 60, 220),
                (250, 200, 0), (120, 120, 120), (90, 10, 160), (0, 200, 200), (255, 128, 64),
                (10, 10, 80), (180, 255, 180), (64, 32, 16), (240, 0, 240), (128, 128, 0), (0, 64, 128),
            ]
            let width = 7
            let height = 5
            var indices: [Int] = []
            for y in 0..<height { for x in 0..<width { indices.append((x * 3 + y * 5 + (x * y) % 3) % count) } }
            return Picture(width: width, height: height, colours: Array(palette.prefix(count)), indices: indices)
        }
    }

    /// How a BMP variant is written.
    public enum BMPVariant: String, CaseIterable, Sendable {
        case palette1, palette2, palette4, palette8, palette8Short, rle8, rle4, rgb555, bitfields565, rgb24, topDown24,
            rgb32, bitfields32Alpha,
            bitfields32BGRA, os2v1Palette8, os2v1RGB24, os2v2RGB24, topDownPalette8

        /// Colours the variant's picture uses.
        public var colours: Int {
            switch self {
            case .palette1: 2
            case .palette2: 4
            case .palette4, .rle4: 16
            case .palette8Short, .topDownPalette8: 6
            default: 16
            }
        }
    }

    // Byte orders: little-endian (BMP, TIFF "II") and big-endian (MPF's "MM" TIFF).
    private static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
    private static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }
    private static func le32(_ v: UInt32) -> [UInt8] { le32(Int(v)) }
    private static func be16(_ v: Int) -> [UInt8] { [UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    private static func be32(_ v: Int) -> [UInt8] { (0..<4).reversed().map { UInt8((v >> (8 * $0)) & 0xFF) } }

    /// `picture` as a BMP of `variant`, written field by field.
    public static func bmp(_ picture: Picture, _ variant: BMPVariant) -> [UInt8] {
        let w = picture.width
        let h = picture.height

        var bits = 24
        var compression = 0
        var headerSize = 40
        var topDown = false
        var os2 = false
        var paletteCount = 0
        var masks: [UInt32] = []
        switch variant {
        case .palette1:
            bits = 1
            paletteCount = 2
        case .palette2:
            bits = 2
            paletteCount = 4
        case .palette4:
            bits = 4
            paletteCount = 16
        case .palette8:
            bits = 8
            paletteCount = 16
        case .palette8Short:
            bits = 8
            paletteCount = 6
        case .topDownPalette8:
            bits = 8
            paletteCount = 6
            topDown = true
        case .rle8:
            bits = 8
            paletteCount = 16
            compression = 1
        case .rle4:
            bits = 4
            paletteCount = 16
            compression = 2
        case .rgb555: bits = 16
        case .bitfields565:
            bits = 16
            compression = 3
            masks = [0xF800, 0x07E0, 0x001F]
        case .rgb24: bits = 24
        case .topDown24:
            bits = 24
            topDown = true
        case .rgb32: bits = 32
        case .bitfields32Alpha:
            bits = 32
            compression = 3
            headerSize = 124
            masks = [0x00FF_0000, 0x0000_FF00, 0x0000_00FF, 0xFF00_0000]
        case .bitfields32BGRA:
            bits = 32
            compression = 3
            masks = [0x0000_FF00, 0x00FF_0000, 0xFF00_0000]
        case .os2v1Palette8:
            bits = 8
            paletteCount = 16
            headerSize = 12
            os2 = true
        case .os2v1RGB24:
            bits = 24
            headerSize = 12
            os2 = true
        case .os2v2RGB24:
            bits = 24
            headerSize = 64
        }

        // Pixels.
        var body: [UInt8] = []
        let rows = topDown ? Array(0..<h) : Array((0..<h).reversed())
        if compression == 1 || compression == 2 {
            for y in rows {
                let indices = (0..<w).map { picture.indices[y * w + $0] }
                if compression == 1 {
                    // The first three pixels as an absolute run, the rest as runs of one.
                    body += [0, 3] + indices[0..<3].map(UInt8.init) + [0]
                    for index in indices[3...] { body += [1, UInt8(index)] }
                } else {
                    // Pairs as runs of two alternating nibbles; the odd last pixel as a run of one.
                    var x = 0
                    while x + 1 < w {
                        body += [2, UInt8(indices[x] << 4 | indices[x + 1])]
                        x += 2
                    }
                    if x < w { body += [1, UInt8(indices[x] << 4)] }
                }
                body += [0, 0]
            }
            body += [0, 1]
        } else {
            let stride = ((w * bits + 31) / 32) * 4
            for y in rows {
                var row = [UInt8](repeating: 0, count: stride)
                for x in 0..<w {
                    let (r, g, b) = picture.rgb(x, y)
                    let index = picture.indices[y * w + x]
                    switch bits {
                    case 1, 2, 4, 8:
                        let bit = x * bits
                        row[bit / 8] |= UInt8(index << (8 - bits - bit % 8))
                    case 16:
                        let value =
                            compression == 3
                            ? (Int(r) >> 3) << 11 | (Int(g) >> 2) << 5 | Int(b) >> 3
                            : (Int(r) >> 3) << 10 | (Int(g) >> 3) << 5 | Int(b) >> 3
                        row[x * 2] = UInt8(value & 0xFF)
                        row[x * 2 + 1] = UInt8(value >> 8)
                    case 24:
                        row[x * 3] = b
                        row[x * 3 + 1] = g
                        row[x * 3 + 2] = r
                    default:
                        if variant == .bitfields32BGRA {
                            row[x * 4] = 0
                            row[x * 4 + 1] = r
                            row[x * 4 + 2] = g
                            row[x * 4 + 3] = b
                        } else {
                            // Alpha: the left column half transparent, the rest opaque.
                            row[x * 4] = b
                            row[x * 4 + 1] = g
                            row[x * 4 + 2] = r
                            row[x * 4 + 3] = variant == .bitfields32Alpha ? (x == 0 ? 128 : 255) : 0
                        }
                    }
                }
                body += row
            }
        }

        // Header, masks, palette.
        var header: [UInt8] = le32(headerSize)
        if os2 {
            header += le16(w) + le16(h) + le16(1) + le16(bits)
        } else {
            header += le32(w) + le32(topDown ? -h : h) + le16(1) + le16(bits) + le32(compression) + le32(body.count)
            header += le32(2835) + le32(2835) + le32(paletteCount == 1 << bits ? 0 : paletteCount) + le32(0)
            if headerSize == 124 {
                header += masks.flatMap { le32($0) } + Array("BGRs".utf8) + [UInt8](repeating: 0, count: 36 + 12 + 16)
            }
            header += [UInt8](repeating: 0, count: headerSize - header.count)
            if headerSize == 40 && compression == 3 { header += masks.flatMap { le32($0) } }
        }
        var palette: [UInt8] = []
        for index in 0..<paletteCount {
            let (r, g, b) = index < picture.colours.count ? picture.colours[index] : (0, 0, 0)
            palette += os2 ? [b, g, r] : [b, g, r, 0]
        }
        let offset = 14 + header.count + palette.count
        return Array("BM".utf8) + le32(offset + body.count) + le32(0) + le32(offset) + header + palette + body
    }

    /// A little-endian TIFF with one uncompressed RGB page per size, each filled with its colour.
    public static func multiPageTIFF(pages: [(width: Int, height: Int, rgb: (UInt8, UInt8, UInt8))]) -> [UInt8] {
        var file: [UInt8] = Array("II".utf8) + le16(42) + le32(8)
        for (index, page) in pages.enumerated() {
            let entries = 10
            let ifdSize = 2 + entries * 12 + 4
            let bitsAt = file.count + ifdSize
            let pixelsAt = bitsAt + 6
            let pixels = (0..<(page.width * page.height)).flatMap { _ in [page.rgb.0, page.rgb.1, page.rgb.2] }
            let next = index == pages.count - 1 ? 0 : pixelsAt + pixels.count
            func entry(_ tag: Int, _ type: Int, _ count: Int, _ value: Int) -> [UInt8] {
                le16(tag) + le16(type) + le32(count) + (type == 3 && count == 1 ? le16(value) + le16(0) : le32(value))
            }
            file += le16(entries)
            file += entry(256, 4, 1, page.width) + entry(257, 4, 1, page.height) + entry(258, 3, 3, bitsAt)
            file += entry(259, 3, 1, 1) + entry(262, 3, 1, 2) + entry(273, 4, 1, pixelsAt) + entry(277, 3, 1, 3)
            file += entry(278, 4, 1, page.height) + entry(279, 4, 1, pixels.count) + entry(284, 3, 1, 1)
            file += le32(next)
            file += le16(8) + le16(8) + le16(8)
            file += pixels
        }
        return file
    }

    /// A 3-frame 16×16 GIF whose second frame's image data is corrupt (an LZW code past the
    /// table's end) and whose first and third frames are whole.
    public static func gifWithCorruptFrame() -> [UInt8] {
        var gif = Array("GIF89a".utf8) + [16, 0, 16, 0, 0x81, 0, 0]  // 16×16, global table of 4 colours
        gif += [0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255]
        gif += [0x21, 0xFF, 0x0B] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
        func frame(colour: Int, corrupt: Bool) -> [UInt8] {
            var bytes: [UInt8] = [0x21, 0xF9, 4, 0, 10, 0, 0, 0, 0x2C, 0, 0, 0, 0, 16, 0, 16, 0, 0]
            // LZW, minimum code size 2 (clear 4, end 5): a clear before every literal keeps every
            // code 3 bits wide. In the corrupt frame one code is 7, past the table's end.
            var codes: [(Int, Int)] = []
            for index in 0..<256 { codes += [(4, 3), (corrupt && index == 40 ? 7 : colour, 3)] }
            codes.append((5, 3))
            var data: [UInt8] = []
            var accumulator = 0
            var count = 0
            for (code, width) in codes {
                accumulator |= code << count
                count += width
                while count >= 8 {
                    data.append(UInt8(accumulator & 0xFF))
                    accumulator >>= 8
                    count -= 8
                }
            }
            if count > 0 { data.append(UInt8(accumulator & 0xFF)) }
            bytes.append(2)
            for start in stride(from: 0, to: data.count, by: 255) {
                let block = data[start..<min(start + 255, data.count)]
                bytes += [UInt8(block.count)] + block
            }
            return bytes + [0]
        }
        gif += frame(colour: 1, corrupt: false) + frame(colour: 2, corrupt: true) + frame(colour: 3, corrupt: false)
        return gif + [0x3B]
    }

    /// `jpeg` with an APP2 ICC_PROFILE segment inserted after SOI holding `profile`.
    public static func jpeg(_ jpeg: [UInt8], withICCProfile profile: [UInt8]) -> [UInt8] {
        let payload = Array("ICC_PROFILE".utf8) + [0, 1, 1] + profile
        let segment: [UInt8] =
            [0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        return Array(jpeg.prefix(2)) + segment + Array(jpeg.dropFirst(2))
    }

    /// An ICC profile header that claims RGB but whose body is noise: lcms cannot use it.
    public static let brokenICCProfile: [UInt8] = {
        var profile = [UInt8](repeating: 0, count: 512)
        for index in profile.indices { profile[index] = UInt8((index * 73 + 11) & 0xFF) }
        profile[0..<4] = [0, 0, 2, 0]
        profile[12..<16] = ArraySlice("mntr".utf8)
        profile[16..<20] = ArraySlice("RGB ".utf8)
        profile[36..<40] = ArraySlice("acsp".utf8)
        return profile
    }()

    /// An Ultra HDR-style JPEG: `primary` with an APP2 MPF segment (a Multi-Picture index of
    /// two images) after SOI, followed by `secondary` (the gain map) after the primary's EOI.
    public static func ultraHDR(primary: [UInt8], secondary: [UInt8]) -> [UInt8] {
        // MPF: "MPF\0", a big-endian TIFF header, an IFD with version, count and the MP entry.
        let entryCount = 3
        let ifdSize = 2 + entryCount * 12 + 4
        let entriesAt = 8 + ifdSize
        var tiff: [UInt8] = Array("MM".utf8) + be16(42) + be32(8) + be16(entryCount)
        tiff += be16(0xB000) + be16(7) + be32(4) + Array("0100".utf8)
        tiff += be16(0xB001) + be16(4) + be32(1) + be32(2)
        tiff += be16(0xB002) + be16(7) + be32(32) + be32(entriesAt)
        tiff += be32(0)
        let segmentLength = 2 + 4 + tiff.count + 32
        let primaryLength = primary.count + 2 + segmentLength
        // The MPF offsets count from the TIFF header, which starts 8 bytes into the segment.
        let tiffStart = 2 + 2 + 2 + 4
        tiff += be32(0x0003_0000) + be32(primaryLength) + be32(0) + be16(0) + be16(0)
        tiff += be32(0) + be32(secondary.count) + be32(primaryLength - tiffStart) + be16(0) + be16(0)
        let segment: [UInt8] = [0xFF, 0xE2] + be16(segmentLength) + Array("MPF".utf8) + [0] + tiff
        return Array(primary.prefix(2)) + segment + Array(primary.dropFirst(2)) + secondary
    }
}
