import ArgumentParser
import Foundation
import PushMedia

struct GCCommand: AsyncParsableCommand, SettingFlags {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Remove cache entries not used for a while and the media no entry references.",
        discussion: """
            Works on either store (a directory or s3://BUCKET[/PREFIX]) and is safe while other \
            processes use it: a file is removed only when no entry references it and it was written \
            over an hour ago; entries written or used during the pass keep their files. Use is \
            written down at most once an hour per entry and process, so --older-than should be \
            well over an hour. Exit status: 0 done, 64 usage error, 74 store error.
            """
    )

    @Option(name: .customLong("older-than"), help: .setting("older-than"))
    var olderThan: String?
    @Option(name: .customLong("max-bytes"), help: .setting("max-bytes"))
    var maxBytes: String?
    @Flag(
        help:
            ArgumentHelp(
                "Then read every media file again and remove those whose content no longer matches their name "
                    + "(truncated, "
                    + "altered, a bad copy).")
    )
    var verify = false
    @Flag(name: .customLong("dry-run"), help: "Report what would be removed; remove nothing.")
    var dryRun = false
    @Flag(help: "Print the report as JSON on stdout.")
    var json = false
    @OptionGroup var options: SharedOptions

    func run() async throws {
        var config = try options.config()
        do { try config.apply(given) } catch {
            throw ValidationError(error.description)
        }
        let policy = RetentionPolicy(olderThan: config.gcOlderThan, maxBytes: config.gcMaxBytes, dryRun: dryRun)
        let resources = ProcessResources(config: config)
        let store: MediaStore
        do {
            store = try MediaStore(config: config, background: resources.store)
            try await resources.housekeeping.run { try store.checkReady(deadline: .now + .seconds(10)) }
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.ioError
        }
        let (dryRun, verify) = (dryRun, verify)
        let result = await resources.housekeeping.run { () -> Result<(RetentionReport, VerifyReport?), StoreError> in
            do throws(StoreError) {
                let retention = try store.collectGarbage(policy)
                return .success((retention, verify ? try store.verifyMedia(dryRun: dryRun) : nil))
            } catch { return .failure(error) }
        }
        let report: RetentionReport
        let verified: VerifyReport?
        switch result {
        case let .success(value): (report, verified) = value
        case let .failure(error):
            FileHandle.writeError("pushmedia: gc: \(error)")
            throw Exit.ioError
        }
        if json { FileHandle.standardOutput.write(try reportJSON(GCReport(retention: report, verify: verified))) }
        let verb = dryRun ? "would remove" : "removed"
        FileHandle.writeError(
            "pushmedia gc \(store.location): \(verb) \(report.entriesRemoved) entries and \(report.mediaRemoved) files "
                + "(\(formatBytes(report.bytesRemoved))); kept \(report.entriesKept) entries and \(report.mediaKept) "
                + "files (\(formatBytes(report.bytesKept)))"
        )
        if let verified {
            FileHandle.writeError(
                "pushmedia gc \(store.location): verified \(verified.checked) files; \(verified.corrupt.count) no "
                    + "longer match their name"
                    + (verified.corrupt.isEmpty
                        ? "" : " (\(dryRun ? "would remove" : "removed") \(verified.corrupt.joined(separator: ", ")))"))
        }
    }
}

/// The JSON report: the retention pass's fields, and `verify` with `--verify`.
private struct GCReport: Encodable {
    let retention: RetentionReport
    let verify: VerifyReport?

    enum CodingKeys: String, CodingKey { case verify }

    func encode(to encoder: any Encoder) throws {
        try retention.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(verify, forKey: .verify)
    }
}
