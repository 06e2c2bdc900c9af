import CPushMediaShim
import Foundation

/// Small helpers for the HTML pages (`report.html`, the server's `/preview`): escaping, safe
/// links, relative paths and the page frame. Every string that reaches a page goes through
/// `escape`: payloads, URLs and messages are untrusted.
public enum HTML {
    /// Text safe inside an element or a quoted attribute value: `& < > " '` become entities.
    public static func escape(_ text: String) -> String {
        var needsWork = false
        for byte in text.utf8
        where byte == 0x26 || byte == 0x3C || byte == 0x3E || byte == 0x22 || byte == 0x27 || byte == 0 {
            needsWork = true
            break
        }
        guard needsWork else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\0": out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A URL that may be used as `src` or `href`: http(s) URLs, and relative paths (no scheme).
    /// Anything else (`javascript:`, `data:`, …) gives nil. The result still needs `escape`.
    public static func safeURL(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, !trimmed.hasPrefix("//"),
            !trimmed.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\\" })
        else { return nil }
        if let colon = trimmed.firstIndex(of: ":") {
            let scheme = trimmed[..<colon]
            // A colon after the first "/", "?" or "#" is part of a relative path, not a scheme.
            if !scheme.contains(where: { "/?#".contains($0) }) {
                return ["http", "https"].contains(scheme.lowercased()) ? trimmed : nil
            }
        }
        return trimmed
    }

    /// `scheme://host[:port]` of an http(s) URL, for a Content-Security-Policy source list.
    public static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            ["http", "https"].contains(scheme), let host = components.host, !host.isEmpty,
            host.unicodeScalars.allSatisfy({
                CharacterSet.alphanumerics.contains($0) || ".-:[]".unicodeScalars.contains($0)
            }),
            host.unicodeScalars.allSatisfy({ $0.isASCII })
        else { return nil }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(shownHost)" + (components.port.map { ":\($0)" } ?? "")
    }

    /// The path of `target` relative to `directory`, both file system paths (symlinks resolved
    /// where they exist), percent-encoded for use in `src`/`href`, e.g. `../pushmedia-store/ab….jpg`.
    public static func relativeLink(from directory: String, to target: String) -> String {
        let from = components(of: resolved(directory))
        let to = components(of: resolved(target))
        var common = 0
        while common < from.count, common < to.count, from[common] == to[common] { common += 1 }
        let parts = Array(repeating: "..", count: from.count - common) + to[common...].map(percentEncoded)
        return parts.isEmpty ? "." : parts.joined(separator: "/")
    }

    /// One path component as it may stand in a URL: unreserved characters kept, the rest %XX.
    public static func percentEncoded(_ component: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(
            CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(0x7F)))
        allowed.insert(charactersIn: "-._~")
        return component.addingPercentEncoding(withAllowedCharacters: allowed) ?? component
    }

    private static func resolved(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        if let real = realpath(absolute, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        // A file not written yet (report.html itself): resolve its directory.
        let url = URL(fileURLWithPath: absolute).standardizedFileURL
        let parent = url.deletingLastPathComponent().path
        if parent != url.path, let real = realpath(parent, nil) {
            defer { free(real) }
            return String(cString: real) + "/" + url.lastPathComponent
        }
        return url.path
    }

    private static func components(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// Sizes as people read them: `182.4 kB`, `3.1 MB` (10^3 steps, as the command line prints).
    public static func bytes(_ count: Int64) -> String {
        let value = Double(count)
        if abs(value) >= 1_000_000 { return String(format: "%.1f MB", value / 1_000_000) }
        if abs(value) >= 1_000 { return String(format: "%.1f kB", value / 1_000) }
        return "\(count) B"
    }

    /// Milliseconds without noise: `0`, `12`, `1520`.
    public static func milliseconds(_ value: Double) -> String {
        String(format: "%.0f", value.isFinite ? value : 0)
    }

    // MARK: Page frame

    /// The only script the pages carry, a progressive enhancement for automated checks: once
    /// everything has loaded it sets `data-images-loaded="<loaded>/<total>"` on `<body>`,
    /// counting `<img>` elements that decoded. The pages read the same without it.
    public static let imagesLoadedScript = """
        addEventListener("load", function () {
          var images = document.images, loaded = 0;
          for (var i = 0; i < images.length; i++) if (images[i].complete && images[i].naturalWidth > 0) loaded++;
          document.body.dataset.imagesLoaded = loaded + "/" + images.length;
        });
        """

    /// `'sha256-…'` of `imagesLoadedScript`, so the Content-Security-Policy allows that script only.
    public static let imagesLoadedScriptHash: String = {
        let text = Array(imagesLoadedScript.utf8).withUnsafeBytes { MediaStore.sha256($0) }
        var digest = [UInt8]()
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            digest.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return "'sha256-\(Data(digest).base64EncodedString())'"
    }()

    /// A policy that lets the page load images, audio and video from `mediaSources` only
    /// (e.g. `'self'`, `file:`, `https://media.example.com`), run only `imagesLoadedScript`
    /// and nothing else: no remote fetches, no other scripts, no plugins.
    public static func contentSecurityPolicy(mediaSources: [String], formAction: Bool = false) -> String {
        let media = mediaSources.isEmpty ? "'none'" : mediaSources.joined(separator: " ")
        var directives = [
            "default-src 'none'", "img-src \(media)", "media-src \(media)", "style-src 'unsafe-inline'",
            "script-src \(imagesLoadedScriptHash)", "base-uri 'none'",
        ]
        directives.append(formAction ? "form-action 'self'" : "form-action 'none'")
        return directives.joined(separator: "; ")
    }

    /// A whole page: doctype, charset, the policy as a `<meta>`, title, inline CSS, `body`, and the script.
    public static func page(title: String, css: String, policy: String, bodyAttributes: String = "", body: String)
        -> String
    {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="\(escape(policy))">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(escape(title))</title>
        <style>
        \(css)
        </style>
        </head>
        <body\(bodyAttributes)>
        \(body)
        <script>\(imagesLoadedScript)</script>
        </body>
        </html>

        """
    }
}
