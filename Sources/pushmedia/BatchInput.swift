import Foundation
import PushMedia

/// What a batch reads: the payload files under a folder, or a manifest, a text file of media
/// URLs one a line, each made into a payload of its own (`{"aps":{"alert":"media",
/// "mutable-content":1},"media_url":URL}`: an alert, as the service extension runs only for
/// one): a campaign's media made and stored before its pushes. A local batch and a
/// fleet batch (`batch --fleet NAME`) read the same items, named the same way.
enum BatchInput {
    /// `*.json` files under `root` (relative paths, sorted).
    case folder(root: URL, files: [String])
    /// The manifest at `path`; each item is named `line-<its line number>.json`.
    case manifest(path: URL, lines: [(name: String, url: String)])

    /// The largest manifest read (a million URLs of a few hundred bytes fit many times over).
    static let manifestLimit = 256 << 20

    /// The batch input at `path`: a folder's payload files (none under `excluded`), or the lines of
    /// the manifest there. Blank lines and lines starting with `#` are skipped.
    /// - Throws: `BatchInputError` when `path` is neither, or the manifest cannot be read.
    static func open(_ path: String, excluding excluded: [String]) throws(BatchInputError) -> BatchInput {
        // A linked folder is read where it points (the enumerator does not follow a link).
        let url = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw .missing(path)
        }
        if isDirectory.boolValue {
            return .folder(root: url, files: BatchCommand.payloadFiles(under: url, excluding: excluded))
        }
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw .unreadable(path) }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: manifestLimit + 1) else { throw .unreadable(path) }
        guard data.count <= manifestLimit else { throw .tooLarge(path, limit: manifestLimit) }
        let text = String(decoding: data, as: UTF8.self)
        var lines: [(Int, String)] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let url = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if url.isEmpty || url.hasPrefix("#") { continue }
            lines.append((index + 1, url))
        }
        let width = max(6, String(lines.last?.0 ?? 0).count)
        return .manifest(
            path: url,
            lines: lines.map { number, url in
                let digits = String(number)
                return ("line-" + String(repeating: "0", count: width - digits.count) + digits + ".json", url)
            })
    }

    /// The items' names, in order: relative paths of payload files, or `line-<n>.json`.
    var names: [String] {
        switch self {
        case let .folder(_, files): files
        case let .manifest(_, lines): lines.map(\.name)
        }
    }

    /// What to say when there is no item.
    var empty: String {
        switch self {
        case let .folder(root, _): "\(root.path): no *.json payloads under it"
        case let .manifest(path, _): "\(path.path): no URLs in the manifest"
        }
    }

    /// The folder or the manifest, as the report names the batch's input.
    var location: String {
        switch self {
        case let .folder(root, _): root.path
        case let .manifest(path, _): path.path
        }
    }

    /// Where relative local media paths in the payloads resolve: the folder, or the manifest's folder.
    var mediaRoot: String {
        switch self {
        case let .folder(root, _): root.path
        case let .manifest(path, _): path.deletingLastPathComponent().path
        }
    }

    /// The payload of item `index`: a file's bytes (nil when it cannot be read), or the payload
    /// made of a manifest's URL.
    func payload(_ index: Int) -> Data? {
        switch self {
        case let .folder(root, files):
            FileManager.default.contents(atPath: root.appendingPathComponent(files[index]).path)
        case let .manifest(_, lines):
            Data(Self.payload(mediaURL: lines[index].url).serialized())
        }
    }

    /// The payload a manifest's line stands for: the media URL and nothing else to show.
    static func payload(mediaURL: String) -> JSONValue {
        .object(
            JSONObject([
                ("aps", .object(JSONObject([("alert", .string("media")), ("mutable-content", .number("1"))]))),
                ("media_url", .string(mediaURL)),
            ]))
    }
}

/// Why a batch's input cannot be read.
enum BatchInputError: Error, CustomStringConvertible {
    case missing(String)
    case unreadable(String)
    case tooLarge(String, limit: Int)

    var description: String {
        switch self {
        case let .missing(path): "\(path): no such folder or manifest"
        case let .unreadable(path): "\(path): cannot read the manifest"
        case let .tooLarge(path, limit): "\(path): a manifest over \(limit >> 20) MiB; split it into several batches"
        }
    }
}
