import Foundation
import PushMedia

/// Headless Chromium for the tests that look at a page as a browser shows it: `chromium` from
/// the PATH (Debian's package, installed by `scripts/setup.sh --test`).
public enum Chromium {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Waiting for the browser blocks, so it happens on a thread of its own.
    static let runner = BlockingExecutor(name: "test-chromium", maxThreads: 2)

    /// `chromium` on the PATH, or nil.
    public static var executable: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/chromium"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Opens `file` in headless Chromium, lets it load (virtual time, `budget` ms) and returns
    /// the DOM as serialized after the page's scripts ran.
    /// - Throws: `Failure` when Chromium is missing, fails or prints nothing.
    public static func dumpDOM(file: String, budget: Int = 5000) async throws -> String {
        guard let executable else {
            throw Failure(
                description:
                    "chromium is not on the PATH: the browser tests need it; install it with `scripts/setup.sh --test` (Debian package `chromium`)"
            )
        }
        return try await runner.run { try run(executable, file: file, budget: budget) }
    }

    private static func run(_ executable: String, file: String, budget: Int) throws -> String {
        let work = TemporaryDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--user-data-dir=\(work.file("profile"))", "--virtual-time-budget=\(budget)", "--dump-dom",
            URL(fileURLWithPath: file).absoluteString,
        ]
        _ = FileManager.default.createFile(atPath: work.file("stdout"), contents: nil)
        _ = FileManager.default.createFile(atPath: work.file("stderr"), contents: nil)
        let stdout = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("stdout")))
        let stderr = try FileHandle(forWritingTo: URL(fileURLWithPath: work.file("stderr")))
        defer {
            try? stdout.close()
            try? stderr.close()
        }
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 90, execute: watchdog)
        process.waitUntilExit()
        watchdog.cancel()
        let dom = (try? String(contentsOfFile: work.file("stdout"), encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0, dom.contains("<html") else {
            let log = (try? String(contentsOfFile: work.file("stderr"), encoding: .utf8)) ?? ""
            throw Failure(
                description: "chromium exited with \(process.terminationStatus) for \(file): \(log.suffix(2000))")
        }
        return dom
    }
}

/// A start tag of an HTML document, as `HTMLTags.scan` finds it.
public struct HTMLTag: Sendable {
    public let name: String
    public let attributes: [String: String]
    /// The text right after the tag, up to the next tag, entities decoded.
    public let text: String

    public func has(class name: String) -> Bool {
        (attributes["class"] ?? "").split(separator: " ").contains { $0 == name }
    }
}

/// Just enough HTML reading for the tests: the start tags of a document with their attributes
/// (entities decoded) and the text that follows each. Script and style contents are skipped.
public enum HTMLTags {
    public static func scan(_ html: String) -> [HTMLTag] {
        let bytes = Array(html.utf8)
        var tags: [HTMLTag] = []
        var i = 0
        func isNameByte(_ b: UInt8) -> Bool {
            b.isLetter || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "-")
        }
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x09 || b == 0x0D || b == 0x0C }
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "<"), i + 1 < bytes.count else {
                i += 1
                continue
            }
            if bytes[i + 1] == UInt8(ascii: "!") {
                // A comment or the doctype.
                if let end = find(Array("-->".utf8), in: bytes, from: i + 2),
                    bytes[i...].starts(with: Array("<!--".utf8))
                {
                    i = end + 3
                } else {
                    i += 2
                }
                continue
            }
            guard bytes[i + 1].isLetter else {
                i += 1
                continue
            }
            var j = i + 1
            while j < bytes.count, isNameByte(bytes[j]) { j += 1 }
            let name = String(decoding: bytes[(i + 1)..<j], as: UTF8.self).lowercased()
            var attributes: [String: String] = [:]
            while j < bytes.count, bytes[j] != UInt8(ascii: ">") {
                if isSpace(bytes[j]) || bytes[j] == UInt8(ascii: "/") {
                    j += 1
                    continue
                }
                let start = j
                while j < bytes.count, !isSpace(bytes[j]), bytes[j] != UInt8(ascii: "="), bytes[j] != UInt8(ascii: ">")
                { j += 1 }
                let attribute = String(decoding: bytes[start..<j], as: UTF8.self).lowercased()
                var value = ""
                if j < bytes.count, bytes[j] == UInt8(ascii: "=") {
                    j += 1
                    if j < bytes.count, bytes[j] == UInt8(ascii: "\"") || bytes[j] == UInt8(ascii: "'") {
                        let quote = bytes[j]
                        let valueStart = j + 1
                        j = valueStart
                        while j < bytes.count, bytes[j] != quote { j += 1 }
                        value = String(decoding: bytes[valueStart..<min(j, bytes.count)], as: UTF8.self)
                        j += 1
                    } else {
                        let valueStart = j
                        while j < bytes.count, !isSpace(bytes[j]), bytes[j] != UInt8(ascii: ">") { j += 1 }
                        value = String(decoding: bytes[valueStart..<j], as: UTF8.self)
                    }
                }
                if attributes[attribute] == nil { attributes[attribute] = decodeEntities(value) }
            }
            j += 1
            if name == "script" || name == "style", let end = find(Array("</\(name)".utf8), in: bytes, from: j) {
                tags.append(HTMLTag(name: name, attributes: attributes, text: ""))
                i = end
                continue
            }
            var k = j
            while k < bytes.count, bytes[k] != UInt8(ascii: "<") { k += 1 }
            tags.append(
                HTMLTag(
                    name: name, attributes: attributes,
                    text: decodeEntities(String(decoding: bytes[min(j, bytes.count)..<k], as: UTF8.self))))
            i = j
        }
        return tags
    }

    public static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[amp...]
            if let semicolon = after.firstIndex(of: ";"), after.distance(from: amp, to: semicolon) <= 10 {
                let entity = String(after[after.index(after: amp)..<semicolon])
                var decoded: String?
                switch entity {
                case "amp": decoded = "&"
                case "lt": decoded = "<"
                case "gt": decoded = ">"
                case "quot": decoded = "\""
                case "apos": decoded = "'"
                case "nbsp": decoded = "\u{A0}"
                default:
                    if entity.hasPrefix("#x") || entity.hasPrefix("#X"),
                        let code = UInt32(entity.dropFirst(2), radix: 16)
                    {
                        decoded = Unicode.Scalar(code).map(String.init)
                    } else if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()) {
                        decoded = Unicode.Scalar(code).map(String.init)
                    }
                }
                if let decoded {
                    out += decoded
                    rest = after[after.index(after: semicolon)...]
                    continue
                }
            }
            out += "&"
            rest = after.dropFirst()
        }
        return out + rest
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count, start <= bytes.count - needle.count else { return nil }
        var i = start
        while i <= bytes.count - needle.count {
            if bytes[i] == needle[0], Array(bytes[i..<(i + needle.count)]).elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}

extension UInt8 {
    fileprivate var isLetter: Bool {
        (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "z"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z"))
    }
}
