import CPushMediaShim
import Foundation

/// Image work with libvips: header probe, shrink-on-load thumbnailing with EXIF auto-rotation,
/// sRGB output, no metadata, and a quality/size ladder until the output fits the platform
/// profile's image cap (`maxBytes`).
/// Every method blocks: call from a `BlockingExecutor`.
public struct Transcoder: Sendable {
    /// Loaders allowed to touch untrusted bytes (libvips' untrusted ones are blocked globally).
    public static let allowedLoaders: Set<String> = [
        "jpegload", "pngload", "gifload", "webpload", "heifload", "tiffload",
    ]
    /// Loaders that decode a reduced image for much less than a full decode (JPEG's DCT scaling);
    /// the others decode whole frames (`decodeMemory`).
    public static let shrinkOnLoadLoaders: Set<String> = ["jpegload"]
    /// Loaders whose pages are an animation's frames.
    public static let animationLoaders: Set<String> = ["gifload", "webpload"]
    /// JPEG qualities tried in order after the configured one.
    static let qualityLadder = [72, 62, 52, 42]

    public var longEdge: Int
    public var thumbnailEdge: Int
    public var maxPixels: Int64
    public var maxFrames: Int
    public var jpegQuality: Int
    public var maxBytes: Int64
    /// The platform profile the attachment is made for (shape, animation, alpha, icon).
    public var profile: PlatformProfile
    /// How a crop to the profile's shape or to a clipping rectangle picks its part.
    public var crop: CropMode
    /// libvips' threads per image, shared by the process's transcoders.
    let threads: VipsThreads

    /// A transcoder for `profile` (default: the configured one), its images given libvips threads
    /// by `threads` (a pipeline's are its `ProcessResources`').
    public init(config: PushMediaConfig, profile: PlatformProfile? = nil, threads: VipsThreads = VipsThreads()) {
        self.threads = threads
        Self.startVips
        let profile = profile ?? config.profile
        self.profile = profile
        longEdge = profile.longEdge.map { min($0, config.longEdge) } ?? config.longEdge
        thumbnailEdge = profile.thumbnail ? config.thumbnailEdge : 0
        maxPixels = config.maxPixels
        maxFrames = config.maxFrames
        jpegQuality = config.jpegQuality
        maxBytes = profile.maxImageBytes
        crop = config.crop
    }

    /// libvips is started once per process (the library's own state), its operation cache off.
    private static let startVips: Void = {
        let workers = ProcessInfo.processInfo.activeProcessorCount
        // One libvips thread per image: parallelism comes from running images side by side.
        guard pm_vips_init("pushmedia", workers > 1 ? 1 : 0) == 0 else {
            fatalError("libvips failed to start: \(takeVipsError())")
        }
    }()

    /// Runs a step of heavy pixel work with the threads `threads` gives the image.
    private func pixelWork<T>(_ body: () throws(TranscodeError) -> T) throws(TranscodeError) -> T {
        let count = threads.began()
        defer { threads.finished() }
        pm_vips_set_concurrency(Int32(count))
        return try body()
    }

    /// Whether libvips answers: encodes a tiny image. Blocking.
    public static func selfTest() -> Bool {
        _ = startVips
        return pm_vips_selftest() == 0
    }

    /// Reads the header and enforces the pixel cap and the loader allow-list.
    public func header(path: String) throws(TranscodeError) -> ImageHeader {
        var raw = pm_header()
        guard pm_vips_header(path, &raw) == 0 else { throw .decodeFailed(takeVipsError()) }
        let loader = withUnsafeBytes(of: raw.loader) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard Self.allowedLoaders.contains(loader) else { throw .loaderNotAllowed(loader) }
        // Pages of other formats (a TIFF's scans, a HEIF's images) are not frames: only the
        // first is read.
        let animation = Self.animationLoaders.contains(loader)
        let frames = animation ? max(1, Int(raw.n_pages)) : 1
        let pageHeight = animation && raw.page_height > 0 ? Int(raw.page_height) : Int(raw.height)
        var header = ImageHeader(
            width: Int(raw.width), height: pageHeight, frames: frames, hasAlpha: raw.has_alpha != 0,
            orientation: Int(raw.orientation), loader: loader, hasProfile: raw.has_icc != 0 && raw.icc_usable != 0)
        header.unusableProfile = raw.has_icc != 0 && raw.icc_usable == 0
        guard header.pixels <= maxPixels, header.width > 0, header.height > 0 else {
            throw .tooManyPixels(width: header.width, height: header.height, limit: maxPixels)
        }
        return header
    }

    /// Rewrites a BMP file as an uncompressed TIFF at `output`, so that the trusted loaders can
    /// take it from there (libvips' only BMP loader is ImageMagick, blocked as untrusted).
    public func convertBMP(path: String, to output: String) throws(TranscodeError) {
        guard let data = FileManager.default.contents(atPath: path) else { throw .decodeFailed("cannot read \(path)") }
        let bmp: BMPDecoder.Image
        do { bmp = try BMPDecoder.decode(Array(data), maxPixels: maxPixels) } catch {
            if case let .tooManyPixels(width, height) = error {
                throw .tooManyPixels(width: width, height: height, limit: maxPixels)
            }
            throw .decodeFailed(error.description)
        }
        var image: OpaquePointer?
        let made = bmp.pixels.withUnsafeBytes {
            pm_vips_from_memory($0.baseAddress, $0.count, Int32(bmp.width), Int32(bmp.height), Int32(bmp.bands), &image)
        }
        guard made == 0, let image else { throw .decodeFailed(takeVipsError()) }
        defer { pm_image_unref(image) }
        guard pm_vips_tiffsave_file(image, output) == 0 else { throw .encodeFailed(takeVipsError()) }
    }

    /// Whether an animation is kept animated: the profile shows animations, and it is within the
    /// frame cap and the pixel cap over all frames.
    public func keepsAnimation(_ header: ImageHeader) -> Bool {
        profile.animation && header.frames > 1 && header.frames <= maxFrames
            && header.pixels * Int64(header.frames) <= maxPixels
    }

    /// Estimated peak memory of making this image's attachment, from its header: the pixels the
    /// loader decodes (JPEG shrinks by up to 8 while decoding; the others decode whole frames,
    /// HEIF through an intermediate YCbCr copy), plus the resized image. Used to bound the
    /// decodes that run at once (`DecodeBudget`).
    public func decodeMemory(_ header: ImageHeader) -> Int64 {
        let bands: Int64 = 4
        let frames = keepsAnimation(header) ? Int64(header.frames) : 1
        let (width, height) = header.uprightSize
        var source = header.pixels * bands * frames
        if Self.shrinkOnLoadLoaders.contains(header.loader) {
            let ratio = max(width, height) / max(1, longEdge)
            let shrink = Int64([8, 4, 2].first { ratio >= $0 } ?? 1)
            source /= shrink * shrink
        } else if header.loader == "heifload" {
            source *= 2
        }
        let edge = Int64(longEdge)
        let resized = min(edge * edge, header.pixels) * bands * frames
        return source + resized
    }

    /// The box an image of `header`'s size is made into with long edge `edge`: the fitting box,
    /// or for a profile with a shape the largest box of that shape inside both the image and
    /// `edge` (cropped, never enlarged).
    func box(_ header: ImageHeader, edge: Int) -> (width: Int, height: Int, crop: Int32) {
        guard let aspect = profile.aspect else { return (edge, edge, 0) }
        let (w, h) = header.uprightSize
        var width = min(edge, w, Int((Double(h) * aspect).rounded(.down)))
        var height = Int((Double(width) / aspect).rounded())
        if height > h {
            height = h
            width = Int((Double(h) * aspect).rounded(.down))
        }
        return (max(1, width), max(1, height), crop.code)
    }

    /// The small JPEG variant (first frame, alpha flattened on white). With thumbnails off
    /// (`thumbnailEdge` 0) a 64 px one is still decoded: it proves the file decodes whole.
    public func thumbnail(path: String, header: ImageHeader? = nil) throws(TranscodeError) -> EncodedImage {
        let edge = thumbnailEdge > 0 ? thumbnailEdge : 64
        let image = try load(
            path, width: edge, height: edge, crop: 0, animated: false, profile: header?.hasProfile ?? true)
        defer { pm_image_unref(image) }
        return try encodeThumbnail(image)
    }

    /// The small JPEG variant of an already encoded image (an attachment).
    public func thumbnail(encoded: [UInt8]) throws(TranscodeError) -> EncodedImage {
        var raw: OpaquePointer?
        let loaded = encoded.withUnsafeBytes {
            pm_vips_thumbnail_buffer($0.baseAddress, $0.count, Int32(thumbnailEdge), Int32(thumbnailEdge), 0, &raw)
        }
        guard loaded == 0, let raw else { throw .decodeFailed(takeVipsError()) }
        defer { pm_image_unref(raw) }
        return try encodeThumbnail(raw)
    }

    /// The profile's square icon (Web Push: 192 px) cut from an encoded image: PNG when it has
    /// alpha, JPEG otherwise. Nil when the profile has no icon.
    public func icon(encoded: [UInt8]) throws(TranscodeError) -> EncodedImage? {
        guard let edge = profile.iconEdge else { return nil }
        var raw: OpaquePointer?
        let loaded = encoded.withUnsafeBytes {
            pm_vips_thumbnail_buffer($0.baseAddress, $0.count, Int32(edge), Int32(edge), crop.code, &raw)
        }
        guard loaded == 0, let raw else { throw .decodeFailed(takeVipsError()) }
        defer { pm_image_unref(raw) }
        let width = Int(pm_image_width(raw))
        let height = Int(pm_image_height(raw))
        if pm_image_has_alpha(raw) != 0 {
            return EncodedImage(
                bytes: try save { pm_vips_pngsave(raw, $0, $1) }, format: .png, width: width, height: height, frames: 1)
        }
        return EncodedImage(
            bytes: try save { pm_vips_jpegsave(raw, Int32(jpegQuality), $0, $1) }, format: .jpeg, width: width,
            height: height, frames: 1)
    }

    /// The normalized rectangle of `aspect` (width / height) that the phone should show as the
    /// thumbnail of an encoded image: its centre, or its most interesting part (libvips' attention
    /// crop), per `crop`.
    public func clipRect(encoded: [UInt8], aspect: Double) throws(TranscodeError) -> ClipRect {
        var rect = [Double](repeating: 0, count: 4)
        let code = crop == .none ? CropMode.centre.code : crop.code
        let result = encoded.withUnsafeBytes { buffer in
            rect.withUnsafeMutableBufferPointer {
                pm_vips_clip_rect(buffer.baseAddress, buffer.count, aspect, code, $0.baseAddress)
            }
        }
        guard result == 0 else { throw .decodeFailed(takeVipsError()) }
        func rounded(_ value: Double) -> Double { (value * 10_000).rounded() / 10_000 }
        return ClipRect(x: rounded(rect[0]), y: rounded(rect[1]), width: rounded(rect[2]), height: rounded(rect[3]))
    }

    /// For an encoded animation, the frame with the most detail (0-based): a better still than
    /// the first frame, which is often blank or a fade-in.
    public func representativeFrame(encoded: [UInt8]) throws(TranscodeError) -> Int {
        var frame: Int32 = 0
        let result = encoded.withUnsafeBytes { pm_vips_busiest_frame($0.baseAddress, $0.count, &frame) }
        guard result == 0 else { throw .decodeFailed(takeVipsError()) }
        return Int(frame)
    }

    private func encodeThumbnail(_ image: OpaquePointer) throws(TranscodeError) -> EncodedImage {
        let opaque = try flatten(image)
        defer { if opaque != image { pm_image_unref(opaque) } }
        let bytes = try save { pm_vips_jpegsave(opaque, Int32(jpegQuality), $0, $1) }
        return EncodedImage(
            bytes: bytes, format: .jpeg, width: Int(pm_image_width(opaque)), height: Int(pm_image_height(opaque)),
            frames: 1)
    }

    /// Decodes a still image once, into memory, at the box its attachment is made in (shrink-on-load
    /// where the loader can). Truncated or corrupt pixels fail here.
    public func decode(path: String, header: ImageHeader) throws(TranscodeError) -> DecodedImage {
        try pixelWork { () throws(TranscodeError) in try decodeNow(path: path, header: header) }
    }

    private func decodeNow(path: String, header: ImageHeader) throws(TranscodeError) -> DecodedImage {
        let box = box(header, edge: longEdge)
        let lazy = try load(
            path, width: box.width, height: box.height, crop: box.crop, animated: false, profile: header.hasProfile)
        defer { pm_image_unref(lazy) }
        var memory: OpaquePointer?
        guard pm_vips_copy_memory(lazy, &memory) == 0, let memory else { throw .decodeFailed(takeVipsError()) }
        return DecodedImage(memory)
    }

    /// The small JPEG variant of a decoded image: a resize of pixels already in memory. An opaque
    /// image is box-shrunk by the whole part of the factor, then reduced for the rest; one with
    /// alpha goes through `vips_thumbnail_image`, which premultiplies.
    public func thumbnail(of decoded: DecodedImage) throws(TranscodeError) -> EncodedImage {
        try pixelWork { () throws(TranscodeError) in try thumbnailNow(of: decoded) }
    }

    private func thumbnailNow(of decoded: DecodedImage) throws(TranscodeError) -> EncodedImage {
        var small: OpaquePointer?
        let resized =
            pm_image_has_alpha(decoded.image) != 0
            ? pm_vips_thumbnail_image(decoded.image, Int32(thumbnailEdge), Int32(thumbnailEdge), &small)
            : pm_vips_fit_shrink(decoded.image, Int32(thumbnailEdge), &small)
        guard resized == 0, let small
        else {
            throw .decodeFailed(takeVipsError())
        }
        defer { pm_image_unref(small) }
        return try encodeThumbnail(small)
    }

    /// The attachment of a decoded still image: PNG when it has alpha (and the profile keeps it),
    /// JPEG otherwise; quality, then size, stepped down until it fits `maxBytes`.
    public func attachment(of decoded: DecodedImage) throws(TranscodeError) -> EncodedImage {
        try pixelWork { () throws(TranscodeError) in try attachmentNow(of: decoded) }
    }

    private func attachmentNow(of decoded: DecodedImage) throws(TranscodeError) -> EncodedImage {
        var image = decoded.image
        var owned: OpaquePointer?
        defer { pm_image_unref(owned) }
        for _ in 0..<4 {
            if let encoded = try encodeStill(image) { return encoded }
            var smaller: OpaquePointer?
            let width = Int32(pm_image_width(image) * 3 / 4)
            let height = Int32(pm_image_height(image) * 3 / 4)
            guard pm_vips_thumbnail_image(image, max(1, width), max(1, height), &smaller) == 0, let smaller else {
                throw .encodeFailed(takeVipsError())
            }
            pm_image_unref(owned)
            owned = smaller
            image = smaller
        }
        throw .doesNotFit(limit: maxBytes)
    }

    /// The attachment: animated GIF when the animation is kept and fits, otherwise the still
    /// attachment of the first frame (`attachment(of:)`).
    /// An animation with a frame that does not decode keeps its first frame, as a still (a
    /// browser shows the frames it can).
    public func attachment(path: String, header: ImageHeader) throws(TranscodeError) -> EncodedImage {
        if keepsAnimation(header) {
            do {
                let gif = try encodeAnimated(path, edge: longEdge, profile: header.hasProfile)
                if gif.bytes.count <= maxBytes { return gif }
            } catch {
                var still = try attachment(of: decode(path: path, header: header))
                still.note =
                    "a frame of the animation does not decode (\(error.description)): its first frame is delivered as "
                    + "a still"
                return still
            }
        }
        return try attachment(of: decode(path: path, header: header))
    }

    /// One still encoding at the image's size: the profile's one format when it has one
    /// (`PlatformProfile.delivers`), else PNG with alpha, else JPEG down the quality ladder; nil
    /// when none fits `maxBytes`.
    private func encodeStill(_ image: OpaquePointer) throws(TranscodeError) -> EncodedImage? {
        let width = Int(pm_image_width(image))
        let height = Int(pm_image_height(image))
        let lossless =
            profile.delivers.flatMap { $0 == .jpeg ? nil : $0 }
            ?? (pm_image_has_alpha(image) != 0 && profile.alpha ? .png : nil)
        if let lossless {
            let bytes =
                lossless == .gif
                ? try save { pm_vips_gifsave(image, $0, $1) } : try save { pm_vips_pngsave(image, $0, $1) }
            return bytes.count <= maxBytes
                ? EncodedImage(bytes: bytes, format: lossless, width: width, height: height, frames: 1) : nil
        }
        let opaque = try flatten(image)
        defer { if opaque != image { pm_image_unref(opaque) } }
        for quality in [jpegQuality] + Self.qualityLadder.filter({ $0 < jpegQuality }) {
            let jpeg = try save { pm_vips_jpegsave(opaque, Int32(quality), $0, $1) }
            if jpeg.count <= maxBytes {
                return EncodedImage(bytes: jpeg, format: .jpeg, width: width, height: height, frames: 1)
            }
        }
        return nil
    }

    /// The animation as a GIF at `edge`. One over `maxBytes` keeps one frame in n (n from how
    /// far over it is, at least 2, doubled until it fits), each shown as long as the frames it
    /// stands for, while at least two remain: the same motion, in coarser steps, within the cap. The caller checks the size of
    /// what comes back.
    private func encodeAnimated(_ path: String, edge: Int, profile: Bool) throws(TranscodeError) -> EncodedImage {
        let image = try load(path, width: edge, height: edge, crop: 0, animated: true, profile: profile)
        defer { pm_image_unref(image) }
        var gif = try encodeGIF(image)
        let frames = gif.frames
        guard gif.bytes.count > maxBytes, frames > 2 else { return gif }
        // The frames are decoded once, and each try picks from them.
        var decoded: OpaquePointer?
        guard pm_vips_copy_memory(image, &decoded) == 0, let decoded else { throw .decodeFailed(takeVipsError()) }
        defer { pm_image_unref(decoded) }
        // The bytes grow about with the frames: start near the step that fits, and double it, up
        // to the step that keeps two frames.
        let widest = (frames + 1) / 2
        var step = min(widest, max(2, Int((Double(gif.bytes.count) * 1.1 / Double(maxBytes)).rounded(.up))))
        while gif.bytes.count > maxBytes {
            var fewer: OpaquePointer?
            guard pm_vips_keep_frames(decoded, Int32(step), &fewer) == 0, let fewer else {
                throw .encodeFailed(takeVipsError())
            }
            defer { pm_image_unref(fewer) }
            gif = try encodeGIF(fewer)
            gif.note =
                "\(gif.frames) of its \(frames) frames are kept (one in \(step), each shown as long as those it stands "
                + "for) to fit \(maxBytes) bytes"
            if step == widest { break }
            step = min(widest, step * 2)
        }
        return gif
    }

    private func encodeGIF(_ image: OpaquePointer) throws(TranscodeError) -> EncodedImage {
        EncodedImage(
            bytes: try save { pm_vips_gifsave(image, $0, $1) }, format: .gif, width: Int(pm_image_width(image)),
            height: Int(pm_image_page_height(image)), frames: Int(pm_image_n_pages(image)))
    }

    /// Decodes and shrinks; an embedded ICC profile (`profile`) is transformed to sRGB, otherwise
    /// the pixels are taken as sRGB already (what browsers and iOS assume) and only the colour
    /// space is converted, without an lcms transform.
    private func load(_ path: String, width: Int, height: Int, crop: Int32, animated: Bool, profile: Bool)
        throws(TranscodeError) -> OpaquePointer
    {
        var image: OpaquePointer?
        let name = animated ? path + "[n=-1]" : path
        guard pm_vips_thumbnail(name, Int32(width), Int32(height), 1, profile ? 1 : 0, crop, &image) == 0, let image
        else {
            throw .decodeFailed(takeVipsError())
        }
        var srgb: OpaquePointer?
        guard pm_vips_srgb(image, &srgb) == 0, let srgb else {
            pm_image_unref(image)
            throw .decodeFailed(takeVipsError())
        }
        pm_image_unref(image)
        return srgb
    }

    private func flatten(_ image: OpaquePointer) throws(TranscodeError) -> OpaquePointer {
        guard pm_image_has_alpha(image) != 0 else { return image }
        var out: OpaquePointer?
        guard pm_vips_flatten_white(image, &out) == 0, let out else { throw .decodeFailed(takeVipsError()) }
        return out
    }

    /// Runs a save call; pixels are decoded lazily here, so truncated input fails here.
    private func save(_ call: (UnsafeMutablePointer<UnsafeMutableRawPointer?>, UnsafeMutablePointer<Int>) -> Int32)
        throws(TranscodeError) -> [UInt8]
    {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard call(&buffer, &length) == 0, let buffer else { throw .decodeFailed(takeVipsError()) }
        defer { pm_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}

/// The pending libvips error message, trimmed to its first lines.
func takeVipsError() -> String {
    guard let raw = pm_vips_error_take() else { return "libvips error" }
    defer { pm_free(raw) }
    let text = String(cString: raw).trimmingCharacters(in: .whitespacesAndNewlines)
    let lines = text.split(separator: "\n").prefix(2).joined(separator: "; ")
    return lines.isEmpty ? "libvips error" : lines
}
