/// Why an image could not be transcoded.
public enum TranscodeError: Error, Sendable, CustomStringConvertible {
    case decodeFailed(String)
    case encodeFailed(String)
    case tooManyPixels(width: Int, height: Int, limit: Int64)
    case loaderNotAllowed(String)
    case doesNotFit(limit: Int64)

    public var reason: String {
        switch self {
        case .decodeFailed: "decode_failed"
        case .encodeFailed: "encode_failed"
        case .tooManyPixels: "too_many_pixels"
        case .loaderNotAllowed: "unsupported_type"
        case .doesNotFit: "too_large"
        }
    }

    public var description: String {
        switch self {
        case let .decodeFailed(why): "image could not be decoded: \(why)"
        case let .encodeFailed(why): "image could not be encoded: \(why)"
        case let .tooManyPixels(w, h, limit):
            "image is \(w)×\(h) = \(Int64(w) * Int64(h)) pixels, over the \(limit)-pixel cap (checked from the "
                + "header, nothing decoded)"
        case let .loaderNotAllowed(loader): "libvips would decode it with \(loader), which is not an allowed loader"
        case let .doesNotFit(limit): "no encoding fits the \(limit)-byte cap"
        }
    }
}
