/// How an image is cropped to a shape.
public enum CropMode: String, Sendable, CaseIterable {
    /// Never crop (clipping rectangles are then centred).
    case none
    /// The middle of the image.
    case centre
    /// libvips' attention crop: the part with the most edges, skin tones and saturated colour.
    case attention

    var code: Int32 {
        switch self {
        case .none: 0
        case .centre: 1
        case .attention: 2
        }
    }
}
