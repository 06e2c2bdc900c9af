import Foundation
import PushMediaNSE
import PushMediaTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A JSON text as the phone's `userInfo`.
func userInfo(_ json: String) throws -> [AnyHashable: Any] {
    try userInfo(Data(json.utf8))
}

func userInfo(_ data: Data) throws -> [AnyHashable: Any] {
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    return Dictionary(uniqueKeysWithValues: object.map { (AnyHashable($0.key), $0.value) })
}

/// A loader configuration writing into `directory`, with a short time limit for tests.
func configuration(_ directory: TemporaryDirectory, timeLimit: TimeInterval = 10, reserve: TimeInterval = 0.5)
    -> AttachmentLoader.Configuration
{
    var configuration = AttachmentLoader.Configuration(
        directory: URL(fileURLWithPath: directory.path, isDirectory: true))
    configuration.timeLimit = timeLimit
    configuration.reserve = reserve
    return configuration
}

/// Runs a loader to its one outcome, and how long that took.
func load(_ info: [AnyHashable: Any], _ configuration: AttachmentLoader.Configuration) async -> (
    AttachmentLoader.Outcome, TimeInterval
) {
    let loader = AttachmentLoader(userInfo: info, configuration: configuration)
    let started = Date()
    let outcome = await withCheckedContinuation {
        (continuation: CheckedContinuation<AttachmentLoader.Outcome, Never>) in
        loader.start { continuation.resume(returning: $0) }
    }
    return (outcome, Date().timeIntervalSince(started))
}

/// Files in `directory` (the loader's), without the delivered one.
func strayFiles(_ directory: TemporaryDirectory, except delivered: AttachmentLoader.Outcome) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return names.filter { $0 != delivered.attachment?.file.fileURL.lastPathComponent }
}

/// A JSON number or string, for building descriptors in test payloads.
func descriptorJSON(
    status: String = "processed", type: String? = "public.jpeg", bytes: Int? = nil, thumb: String? = nil,
    extra: String = ""
) -> String {
    var fields = [#""v":1"#, #""status":"\#(status)""#]
    if let type { fields.append(#""type":"\#(type)""#) }
    if let bytes { fields.append(#""bytes":\#(bytes)"#) }
    if let thumb { fields.append(#""thumb":"\#(thumb)""#) }
    if !extra.isEmpty { fields.append(extra) }
    return "{" + fields.joined(separator: ",") + "}"
}

/// An alert payload with `media_url` and, optionally, a descriptor.
func payload(media url: String, descriptor: String? = nil) -> String {
    #"{"aps":{"alert":{"title":"Deals","body":"Up to 40% off"},"mutable-content":1},"media_url":"\#(url)""#
        + (descriptor.map { #","pushmedia":\#($0)"# } ?? "") + "}"
}

/// Collects what handlers are given, from any thread (a loader's reports: their count must
/// stay 1).
final class Recorder<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []

    func add(_ value: Value) {
        lock.lock()
        stored.append(value)
        lock.unlock()
    }

    var values: [Value] {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }

    var first: Value? { values.first }
    var count: Int { values.count }
}

/// The two samples the download tests serve: a JPEG photo and a PNG with alpha (read once).
enum DownloadSamples {
    static let bytes: (photo: [UInt8], png: [UInt8]) = {
        guard let photo = try? sampleMedia("photo-exif.jpg"), let png = try? sampleMedia("logo-alpha.png") else {
            fatalError("the samples photo-exif.jpg and logo-alpha.png are missing from samples/media")
        }
        return (photo, png)
    }()
}
