import CPushMediaShim

/// An image's header, read before any pixel is decoded.
public struct ImageHeader: Sendable, Equatable {
    public var width: Int
    /// Height of one frame.
    public var height: Int
    public var frames: Int
    public var hasAlpha: Bool
    /// EXIF orientation, 1...8.
    public var orientation: Int
    /// The libvips loader that will decode it, e.g. `jpegload`.
    public var loader: String
    /// It carries an ICC profile, so its colours go through an sRGB transform.
    public var hasProfile = true
    /// It carries an ICC profile that is broken or does not fit its colour space: ignored, the
    /// pixels are taken as sRGB (what browsers do).
    public var unusableProfile = false

    public var pixels: Int64 { Int64(width) * Int64(height) }
    /// Width and height as the phone shows them (after EXIF rotation).
    public var uprightSize: (width: Int, height: Int) { orientation >= 5 ? (height, width) : (width, height) }
}

/// An encoded image ready to store.
public struct EncodedImage: Sendable {
    public var bytes: [UInt8]
    public var format: MediaFormat
    public var width: Int
    public var height: Int
    public var frames: Int
    /// What was given up to deliver it (e.g. an animation frame that does not decode).
    public var note: String? = nil
}

/// An image decoded once into memory at its attachment size (sRGB, upright, cropped to the
/// profile's shape): the attachment and the thumbnail are both encoded from these pixels.
public final class DecodedImage: @unchecked Sendable {
    let image: OpaquePointer
    public var width: Int { Int(pm_image_width(image)) }
    public var height: Int { Int(pm_image_height(image)) }

    init(_ image: OpaquePointer) { self.image = image }
    deinit { pm_image_unref(image) }
}
