import PushMedia

/// libmagic and libvips are not instrumented, so libFuzzer cannot see which of their paths an
/// input took. These functions branch on what they answered (format, MIME, words of libmagic's
/// description, the header's loader and shape, the error), so that inputs with a new answer
/// count as new coverage and stay in the corpus.
enum OutcomeFeatures {
    @inline(never)
    static func sniffed(_ result: SniffResult) {
        _ = word(result.format.id)
        _ = word(String(result.magicMIME.prefix { $0 != "/" }))
        _ = word(result.magicMIME)
        for token in result.description.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "(" || $0 == ")" })
            .prefix(24)
        {
            _ = word(String(token))
        }
    }

    @inline(never)
    static func header(_ header: ImageHeader) {
        _ = word(header.loader)
        _ = word(header.hasAlpha ? "alpha" : "opaque")
        _ = word(header.frames == 1 ? "still" : header.frames <= 100 ? "animated" : "many-frames")
        _ = word("orientation-\(header.orientation)")
        _ = word(header.width == header.height ? "square" : header.width > header.height ? "landscape" : "portrait")
        _ = word(header.pixels < 64 ? "tiny" : header.pixels < 1 << 20 ? "small" : "large")
    }

    @inline(never)
    static func failed(_ error: TranscodeError) {
        _ = word(error.reason)
        if case let .loaderNotAllowed(loader) = error { _ = word(loader) }
    }

    /// One branch per known word (a Swift string switch compares case by case).
    @inline(never)
    static func word(_ text: String) -> Int {
        switch text {
        case "jpeg", "JPEG": 1
        case "png", "PNG": 2
        case "gif", "GIF": 3
        case "webp", "Web/P", "WebP": 4
        case "heic", "heif", "HEIF", "HEIC", "ISO": 5
        case "avif", "AVIF": 6
        case "tiff", "TIFF": 7
        case "bmp", "PC", "bitmap": 8
        case "mp3", "MPEG", "ADTS": 9
        case "m4a", "mp4", "MP4", "Apple": 10
        case "wav", "WAVE", "RIFF": 11
        case "aiff", "AIFF", "IFF": 12
        case "webm", "WebM", "Matroska", "EBML": 13
        case "quicktime", "QuickTime": 14
        case "unsupported": 15
        case "image": 16
        case "audio": 17
        case "video": 18
        case "text": 19
        case "application": 20
        case "data": 21
        case "Exif": 22
        case "JFIF": 23
        case "baseline": 24
        case "progressive": 25
        case "interlaced", "non-interlaced": 26
        case "RGBA", "8-bit/color": 27
        case "RGB", "16-bit/color": 28
        case "grayscale", "gray": 29
        case "colormap": 30
        case "version": 31
        case "89a", "87a": 32
        case "lossless", "lossy", "VP8", "VP8L", "VP8X": 33
        case "big-endian", "little-endian": 34
        case "Windows", "OS/2": 35
        case "24", "32", "8": 36
        case "truncated", "corrupted", "invalid": 37
        case "precision": 38
        case "components": 39
        case "frames": 40
        case "stereo", "mono": 41
        case "Hz": 42
        case "layer", "III": 43
        case "ID3": 44
        case "Base": 45
        case "SVG", "Scalable": 46
        case "HTML": 47
        case "PDF": 48
        case "gzip": 49
        case "empty": 50
        case "jpegload": 51
        case "pngload": 52
        case "gifload": 53
        case "webpload": 54
        case "heifload": 55
        case "tiffload": 56
        case "alpha": 57
        case "opaque": 58
        case "still": 59
        case "animated": 60
        case "many-frames": 61
        case "orientation-1": 62
        case "orientation-2", "orientation-3", "orientation-4": 63
        case "orientation-5", "orientation-6", "orientation-7", "orientation-8": 64
        case "square": 65
        case "landscape": 66
        case "portrait": 67
        case "tiny": 68
        case "small": 69
        case "large": 70
        case "decode_failed": 71
        case "too_many_pixels": 72
        case "unsupported_type": 73
        case "magickload", "svgload", "pdfload", "vipsload", "matrixload", "csvload", "ppmload", "radload", "fitsload":
            74
        default: 0
        }
    }
}
