import Foundation

/// A media URL's path, in imgproxy's URL grammar, so that imgproxy's URL builders make them:
///
///     /<signature>/<option>/…/<base64url of the source>[.<ext>]   (the Base64 may be split by `/`)
///     /<signature>/<option>/…/plain/<percent-encoded source>[@<ext>]
///
/// Options are `name:argument[:argument…]`: `pr:`/`preset:` names the platform profile,
/// `cb:`/`cachebuster:` asks for a new fetch, `f:`/`format:`/`ext:` gives the extension. The
/// shape options imgproxy's builders add on their own (`ignoredOptions`) are accepted and have no
/// effect: the platform decides the shape. Any other option is refused, naming it.
public struct MediaURL: Sendable, Equatable {
    /// How the source is written in the path.
    public enum Encoding: Sendable, Equatable {
        case base64, plain
    }

    /// The first segment: a signature, or a word for "unsigned" (`isUnsigned`).
    public var signature: String
    /// Everything after the signature, from its leading `/`: what the signature covers.
    public var signedPath: String
    /// The `pr:` option: a platform profile's name; nil gives the default (`ios`).
    public var preset: String?
    /// The `cb:` option.
    public var cacheBuster: String?
    /// What the extension (or `f:`) asks for; nil when the URL gives none.
    public var format: MediaFormat?
    /// The source URL, decoded.
    public var source: String
    /// The source's scheme, host, port and path, read once (`checkSource`).
    public var sourceParts: SourceParts?
    public var encoding: Encoding
    /// Shape options given and ignored, as written.
    public var ignored: [String] = []

    /// The words imgproxy's builders put in the signature's place when they do not sign.
    public static let unsignedWords: Set<String> = ["insecure", "_", "unsafe"]
    /// Options imgproxy's URL builders add by themselves; they have no effect here.
    public static let ignoredOptions: Set<String> = [
        "rs", "resize", "s", "size", "rt", "resizing_type", "w", "width", "h", "height", "g", "gravity",
        "el", "enlarge", "ex", "extend", "q", "quality", "dpr",
    ]
    /// Extensions a media URL may ask for, and the format each delivers.
    public static let formats: [String: MediaFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "png": .png, "gif": .gif, "mp4": .mp4, "m4a": .m4a, "mp3": .mp3,
    ]
    /// Longest path taken (a longer one is `tooLong`: 414).
    public static let maxPathBytes = 16_384
    /// Longest source URL, as the pipeline takes it.
    public static let maxSourceBytes = 8192

    /// Whether the signature's place holds one of `unsignedWords`.
    public var isUnsigned: Bool { Self.unsignedWords.contains(signature) }

    /// The signature and the path it covers (from the `/` after it), before anything else is
    /// read: a signature is checked before the rest of the path is looked at.
    public static func split(_ path: String) throws(MediaURLError) -> (signature: String, signedPath: String) {
        guard path.utf8.count <= maxPathBytes else { throw .tooLong(path.utf8.count) }
        guard path.hasPrefix("/") else { throw .notAMediaURL }
        let afterSlash = path.dropFirst()
        guard let slash = afterSlash.firstIndex(of: "/"), slash > afterSlash.startIndex,
            afterSlash.index(after: slash) < afterSlash.endIndex
        else { throw .notAMediaURL }
        return (String(afterSlash[..<slash]), String(afterSlash[slash...]))
    }

    /// Parses a request's path (as sent, percent-encoding and all; without the query).
    public static func parse(_ path: String) throws(MediaURLError) -> MediaURL {
        let (signature, signedPath) = try split(path)
        var url = MediaURL(signature: signature, signedPath: signedPath, source: "", encoding: .base64)
        var rest = signedPath.dropFirst()
        var optionFormat: (text: String, format: MediaFormat)?
        while true {
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            let segment = rest[..<end]
            if segment == "plain" {
                guard end < rest.endIndex else { throw .invalidSource("nothing follows plain/") }
                try url.readPlain(rest[rest.index(after: end)...])
                break
            }
            if segment.contains(":") {
                if let format = try url.readOption(segment) { optionFormat = format }
                guard end < rest.endIndex else { throw .invalidSource("no source after the options") }
                rest = rest[rest.index(after: end)...]
                continue
            }
            if segment.isEmpty && end < rest.endIndex {
                rest = rest[rest.index(after: end)...]
                continue
            }
            try url.readBase64(rest)
            break
        }
        if let optionFormat {
            if let format = url.format, format != optionFormat.format {
                throw .invalidOption(
                    "format", "the option asks for \(optionFormat.text) but the extension for \(format.fileExtension)")
            }
            url.format = optionFormat.format
        }
        url.sourceParts = try checkSource(url.source)
        return url
    }

    /// Reads one `name:arguments` option; returns a format it gives.
    private mutating func readOption(_ segment: Substring) throws(MediaURLError) -> (
        text: String, format: MediaFormat
    )? {
        let parts = segment.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        let argument = parts.count > 1 ? String(parts[1]) : ""
        switch name {
        case "pr", "preset":
            guard !argument.isEmpty, !argument.contains(":") else {
                throw .invalidOption(name, "give one platform profile, e.g. pr:ios")
            }
            preset = argument
        case "cb", "cachebuster":
            cacheBuster = argument.isEmpty ? nil : argument
        case "f", "format", "ext":
            let text = argument.lowercased()
            guard let format = Self.formats[text] else { throw .unknownFormat(argument) }
            return (text, format)
        case _ where Self.ignoredOptions.contains(name):
            ignored.append(String(segment))
        default:
            throw .unknownOption(name)
        }
        return nil
    }

    /// `<percent-encoded source>[@<ext>]`.
    private mutating func readPlain(_ text: Substring) throws(MediaURLError) {
        encoding = .plain
        var encoded = text
        if let at = text.lastIndex(of: "@") {
            encoded = text[..<at]
            let ext = text[text.index(after: at)...]
            guard let format = Self.formats[ext.lowercased()] else { throw .unknownFormat(String(ext)) }
            self.format = format
        }
        guard let decoded = Self.percentDecoded(encoded) else {
            throw .invalidSource("the plain source is not valid percent-encoding")
        }
        source = decoded
    }

    /// `<base64url>[.<ext>]`, the Base64 possibly split by `/`.
    private mutating func readBase64(_ text: Substring) throws(MediaURLError) {
        encoding = .base64
        var joined = text.split(separator: "/").joined()
        if let dot = joined.lastIndex(of: ".") {
            let ext = joined[joined.index(after: dot)...]
            guard let format = Self.formats[ext.lowercased()] else { throw .unknownFormat(String(ext)) }
            self.format = format
            joined = String(joined[..<dot])
        }
        guard let bytes = Self.base64URLDecode(joined) else {
            throw .invalidSource("the source is not URL-safe Base64 (A–Z, a–z, 0–9, - and _)")
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw .invalidSource("the Base64 source is not UTF-8 text")
        }
        source = decoded
    }

    /// The checks every source passes: an http(s) URL with a host, no credentials, no `.` or `..`
    /// segments (percent-encoded or not: an origin would resolve them, stepping out of an
    /// allow-listed folder), within `maxSourceBytes`.
    @discardableResult
    static func checkSource(_ source: String) throws(MediaURLError) -> SourceParts {
        guard !source.isEmpty else { throw .invalidSource("the source is empty") }
        guard source.utf8.count <= maxSourceBytes else {
            throw .invalidSource("the source is \(source.utf8.count) bytes long, over \(maxSourceBytes)")
        }
        guard source.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F && $0.value != 0x5C }) else {
            throw .invalidSource("the source holds spaces, control characters or backslashes")
        }
        guard let parts = SourceParts(source) else {
            throw .invalidSource("the source is not an http(s) URL with a host")
        }
        guard !parts.hasCredentials else {
            throw .invalidSource("credentials in the source (user:password@) are refused")
        }
        let decoded = percentDecoded(parts.path) ?? parts.path
        let segments = decoded.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if segments.contains(where: { !$0.isEmpty && $0.count <= 2 && $0.allSatisfy { $0 == UInt8(ascii: ".") } }) {
            throw .invalidSource("the source's path has . or .. segments")
        }
        return parts
    }

    /// `text` with its `%XX` escapes decoded (a `+` stays a `+`, as in a path); nil for a `%` not
    /// followed by two hex digits, or bytes that are not UTF-8.
    public static func percentDecoded(_ text: some StringProtocol) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexDigitValue), let low = iterator.next().flatMap(hexDigitValue)
            else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Decodes URL-safe Base64, with or without padding; nil for any other character.
    public static func base64URLDecode(_ text: String) -> [UInt8]? {
        var standard = ""
        standard.reserveCapacity(text.utf8.count + 3)
        for character in text.utf8 {
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                standard.unicodeScalars.append(UnicodeScalar(character))
            case UInt8(ascii: "-"): standard.append("+")
            case UInt8(ascii: "_"): standard.append("/")
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        guard standard.utf8.count % 4 != 1 else { return nil }
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    /// URL-safe Base64 without padding.
    public static func base64URLEncode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// The path for `source` with `options` (each `name:argument`), the source in Base64 with
    /// `.ext`, or `plain` and percent-encoded with `@ext`; its signature goes in front.
    public static func unsignedPath(source: String, options: [String], ext: String?, plain: Bool = false) -> String {
        let prefix = options.map { "/" + $0 }.joined()
        if plain {
            var allowed = CharacterSet.urlPathAllowed
            allowed.remove(charactersIn: "%?@#")
            let encoded = source.addingPercentEncoding(withAllowedCharacters: allowed) ?? source
            return prefix + "/plain/" + encoded + (ext.map { "@" + $0 } ?? "")
        }
        return prefix + "/" + base64URLEncode(Array(source.utf8)) + (ext.map { "." + $0 } ?? "")
    }

    /// This URL's path with `format`'s extension, written as its source is (`.ext` or `@ext`);
    /// a `f:` option is left as it is. The signature is the caller's: the path changes.
    public func signedPath(withExtension ext: String) -> String {
        switch encoding {
        case .plain: signedPath + "@" + ext
        case .base64: signedPath + "." + ext
        }
    }
}

/// Why a path is not a media URL PushMedia serves.
public enum MediaURLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Fewer than two segments, or an empty signature: not this route's.
    case notAMediaURL
    case tooLong(Int)
    case unknownOption(String)
    case invalidOption(String, String)
    case unknownFormat(String)
    case invalidSource(String)

    /// Machine-readable, for the error answer's `code`.
    public var code: String {
        switch self {
        case .notAMediaURL: "not_found"
        case .tooLong: "uri_too_long"
        case .unknownOption, .invalidOption: "invalid_option"
        case .unknownFormat: "invalid_format"
        case .invalidSource: "invalid_source"
        }
    }

    public var description: String {
        switch self {
        case .notAMediaURL:
            "not a media URL: expected /<signature>/<options>/<base64 source>.<ext> or "
                + "/<signature>/<options>/plain/<source>@<ext>"
        case let .tooLong(bytes): "the path is \(bytes) bytes long, over \(MediaURL.maxPathBytes)"
        case let .unknownOption(name):
            "unknown option \"\(name)\": media URLs take pr (preset), cb (cachebuster) and f (format); the shape "
                + "options \(MediaURL.ignoredOptions.sorted().joined(separator: ", ")) are accepted and ignored"
        case let .invalidOption(name, why): "option \"\(name)\": \(why)"
        case let .unknownFormat(ext):
            "\"\(ext)\" is not a format media URLs deliver: use jpg, png, gif, mp4, m4a or mp3"
        case let .invalidSource(why): "invalid source: \(why)"
        }
    }
}

/// The parts of an http(s) URL that the source rules look at, read without Foundation's URL
/// (which accepts and rewrites too much): scheme, credentials, host, port, path.
public struct SourceParts: Sendable, Equatable {
    /// `http` or `https`, lowercased.
    public var scheme: String
    public var hasCredentials: Bool
    /// Lowercased; IPv6 literals keep their brackets.
    public var host: String
    /// The port given, or the scheme's (80, 443).
    public var port: Int
    /// From the first `/` after the authority (`/` when none), without query or fragment.
    public var path: String

    public init?(_ url: String) {
        // Over the UTF-8 bytes: every delimiter is ASCII.
        let bytes = url.utf8
        let slash = UInt8(ascii: "/")
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme = String(url[..<colon]).lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        var cursor = bytes.index(after: colon)
        for _ in 0..<2 {
            guard cursor < bytes.endIndex, bytes[cursor] == slash else { return nil }
            cursor = bytes.index(after: cursor)
        }
        let afterScheme = url[cursor...]
        let authorityEnd =
            afterScheme.utf8.firstIndex(where: { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
            ?? afterScheme.endIndex
        var authority = afterScheme[..<authorityEnd]
        hasCredentials = authority.utf8.contains(UInt8(ascii: "@"))
        if let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) {
            authority = authority[authority.index(after: at)...]
        }
        var host = authority
        var port = scheme == "https" ? 443 : 80
        if authority.utf8.first == UInt8(ascii: "[") {
            guard let close = authority.utf8.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.utf8.first == UInt8(ascii: ":"), let value = Int(after.dropFirst()),
                    (1...65535).contains(value)
                else { return nil }
                port = value
            }
        } else if let colon = authority.utf8.lastIndex(of: UInt8(ascii: ":")) {
            host = authority[..<colon]
            guard let value = Int(authority[authority.index(after: colon)...]), (1...65535).contains(value) else {
                return nil
            }
            port = value
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "%") }) else {
            return nil
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        var path = afterScheme[authorityEnd...]
        if let cut = path.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            path = path[..<cut]
        }
        self.path = path.isEmpty ? "/" : String(path)
    }
}
