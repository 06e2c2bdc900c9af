/// Versions of the tool and of the processing rules.
public enum PushMediaVersion {
    public static let string = "0.1.0"
    /// Bumped whenever the pipeline's output for the same input and options changes; part of
    /// every cache key, so a new version never serves a stale result.
    public static let pipeline = 4
}

extension String {
    /// The NUL-terminated text in a C character buffer.
    init(cBuffer buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
