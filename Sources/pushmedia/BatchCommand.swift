import ArgumentParser
import Foundation
import PushMedia

struct BatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Rewrite every *.json payload under a directory, or make the media of a manifest's URLs.",
        discussion: """
            Rewritten payloads go under --out with the same relative paths, media into the store, \
            every outcome into <out>/report.json and <out>/report.html (previews from the store), and a \
            summary to stdout. Local media paths in the \
            payloads resolve inside DIR (or --media-root). Re-running reuses the cache. A manifest \
            (a text file of media URLs, one a line; # comments) makes each line the payload \
            {"aps":{"alert":"media","mutable-content":1},"media_url":URL}, named line-<number>.json. \
            With --fleet NAME (and --fleet-db), the payloads are put in the fleet's queue instead, for \
            any number of `pushmedia work --fleet NAME` to process; `batch --fleet NAME --status` \
            shows the progress and, once every item is done, writes the same outputs and report.
            """
    )

    @Argument(
        help:
            ArgumentHelp(
                "Folder of payload files (searched recursively for *.json), or a manifest: a text file of media "
                    + "URLs, one a line, each made into a payload of its own; not with --status."))
    var directory: String?
    @Option(help: "Put the payloads in the fleet's queue as the batch NAME (needs --fleet-db).")
    var fleet: String?
    @Flag(help: "With --fleet: show the batch's progress; once done, write its outputs and report under --out.")
    var status = false
    @Flag(help: "With --status: wait until the batch is done.")
    var wait = false
    @Flag(help: "With --fleet NAME: delete the batch and its items from the queue (outputs written under --out stay).")
    var delete = false
    @Option(help: "Directory for rewritten payloads, report.json and report.html.")
    var out: String = "out"
    @Option(name: .customLong("concurrency"), help: "Media transcoded at once (default: one per core).")
    var concurrencyGiven: Int?
    /// `--concurrency`, one per core when not given.
    var concurrency: Int { concurrencyGiven ?? ProcessInfo.processInfo.activeProcessorCount }
    @Option(
        help:
            ArgumentHelp(
                "Payloads read and fetched ahead of those transcoding, so that no core waits for the network "
                    + "(default: as "
                    + "many as --concurrency).")
    )
    var prefetch: Int?
    @Flag(
        help: "Revalidate cached media with their origins even when fresh (a 304 or the same bytes cost no transcode).")
    var refresh = false
    @OptionGroup var fleetOptions: FleetOptions
    @OptionGroup var options: SharedOptions

    func validate() throws {
        if let fleet { try FleetBatch.validate(name: fleet) }
        if status && fleet == nil { throw ValidationError("--status needs --fleet NAME") }
        if wait && !status { throw ValidationError("--wait needs --status") }
        if delete && (fleet == nil || status || directory != nil) {
            throw ValidationError("--delete needs --fleet NAME, and takes no directory and no --status")
        }
        guard concurrency >= 1 && concurrency <= 1024 else {
            throw ValidationError("--concurrency must be between 1 and 1024")
        }
        if let prefetch, !(0...1024).contains(prefetch) {
            throw ValidationError("--prefetch must be between 0 and 1024")
        }
    }

    func run() async throws {
        var config = try options.config()
        do { try config.apply(fleetOptions.given) } catch { throw ValidationError(error.description) }
        config.maxTranscodes = concurrency
        if let fleet, delete { return try await FleetBatch.delete(name: fleet, config: config) }
        if let fleet, status {
            guard directory == nil else { throw ValidationError("--status takes no directory") }
            return try await FleetBatch.status(name: fleet, config: config, out: out, wait: wait)
        }
        guard let directory else { throw ValidationError("give the folder of payload files, or a manifest of URLs") }
        let outRoot = URL(fileURLWithPath: out).standardizedFileURL
        // A local store's folder is not read as payloads (an s3:// location names no folder here).
        let store = URL(fileURLWithPath: config.storeLocation).standardizedFileURL.path
        let input: BatchInput
        do {
            input = try BatchInput.open(
                directory, excluding: [outRoot.path] + (config.storeLocation.hasPrefix("s3://") ? [] : [store]))
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.ioError
        }
        if let fleet {
            return try await FleetBatch.enqueue(name: fleet, input: input, config: config)
        }
        let pipeline = try await openPipeline(config)
        Self.removeInterruptedWrites(under: outRoot)
        let names = input.names
        if names.isEmpty { FileHandle.writeError("pushmedia: \(input.empty)") }
        let mediaRoot = config.mediaRoot ?? input.mediaRoot
        let started = Date()
        let progress = ProgressDisplay(total: names.count)

        var items = [BatchItem?](repeating: nil, count: names.count)
        var failedWrites = 0
        let refresh = self.refresh
        await names.forEachConcurrently(width: concurrency + (prefetch ?? concurrency)) { index, relative in
            await Self.processItem(
                relative, payload: input.payload(index), outRoot: outRoot, pipeline: pipeline, mediaRoot: mediaRoot,
                refresh: refresh)
        } onResult: { index, item in
            items[index] = item
            if item.writeError != nil { failedWrites += 1 }
            progress.advance(item)
        }
        progress.finish()

        let finished = items.compactMap { $0 }
        try Self.writeReports(
            finished, seconds: Date().timeIntervalSince(started), input: input.location, outRoot: outRoot,
            pipeline: pipeline, mediaRoot: mediaRoot, out: out)
        if failedWrites > 0 { throw Exit.ioError }
    }

    /// report.json and report.html under `outRoot`, and the summary on stdout: a local batch's,
    /// and a fleet batch's once its items are done.
    static func writeReports(
        _ finished: [BatchItem], seconds: Double, input: String, outRoot: URL, pipeline: Pipeline, mediaRoot: String,
        out: String
    ) throws {
        let summary = BatchSummary(items: finished, seconds: seconds)
        let report = BatchReport(
            version: PushMediaVersion.string, input: input, out: outRoot.path, store: pipeline.store.location,
            baseURL: pipeline.config.baseURL, summary: summary, items: finished)
        do { try writeAtomically(reportJSON(report), to: outRoot.appendingPathComponent("report.json").path) } catch {
            FileHandle.writeError("pushmedia: \(out)/report.json: cannot write: \(error.localizedDescription)")
            throw Exit.ioError
        }
        let html = HTMLReport(
            items: finished.map {
                HTMLReport.Item(file: $0.file, output: $0.output, outcome: $0.outcome, writeError: $0.writeError)
            },
            summary: summary.forHTML, reportDirectory: outRoot.path, storeDirectory: pipeline.store.directory,
            storeLocation: pipeline.store.location,
            mediaRoot: mediaRoot, input: input)
        do {
            try writeAtomically(Data(html.render().utf8), to: outRoot.appendingPathComponent("report.html").path)
        } catch {
            FileHandle.writeError("pushmedia: \(out)/report.html: cannot write: \(error.localizedDescription)")
            throw Exit.ioError
        }
        print(summary.table(out: outRoot.path))
    }

    /// Removes temporary files that an interrupted run (crash, kill -9) left beside its outputs:
    /// outputs are written as `.<name>.<id>.tmp` and renamed, so these were never outputs.
    static func removeInterruptedWrites(under outRoot: URL) {
        guard let enumerator = FileManager.default.enumerator(atPath: outRoot.path) else { return }
        for case let relative as String in enumerator {
            let name = (relative as NSString).lastPathComponent
            if name.hasPrefix("."), name.hasSuffix(".tmp") { unlink(outRoot.appendingPathComponent(relative).path) }
        }
    }

    /// Relative paths of `*.json` files under `root`, sorted, skipping hidden entries and `excluded` directories.
    static func payloadFiles(under root: URL, excluding excluded: [String]) -> [String] {
        guard
            let enumerator = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey, .isDirectoryKey],
                options: [.skipsHiddenFiles])
        else { return [] }
        var found: [String] = []
        let prefix = root.path.hasSuffix("/") ? root.path : root.path + "/"
        for case let url as URL in enumerator {
            let path = url.standardizedFileURL.path
            if excluded.contains(path) {
                enumerator.skipDescendants()
                continue
            }
            guard url.pathExtension == "json",
                (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                path.hasPrefix(prefix), !(path == prefix + "report.json" && excluded.contains(root.path))
            else { continue }
            found.append(String(path.dropFirst(prefix.count)))
        }
        return found.sorted()
    }

    /// One item: its payload (nil: its file could not be read) through the pipeline, and the
    /// rewritten payload written under `outRoot` by the item's name.
    static func processItem(
        _ relative: String, payload data: Data?, outRoot: URL, pipeline: Pipeline, mediaRoot: String,
        refresh: Bool = false
    ) async -> BatchItem {
        let outputPath = outRoot.appendingPathComponent(relative).path
        let clock = ContinuousClock.now
        guard let data else {
            var outcome = Outcome(status: .rejected, reason: "io_error", message: "\(relative): cannot read the file")
            outcome.timingsMs.total = Double(
                (ContinuousClock.now - clock).components.attoseconds / 1_000_000_000_000_000)
            return BatchItem(file: relative, output: nil, outcome: outcome, writeError: nil)
        }
        let (bytes, outcome) = await pipeline.processItem(
            data, context: PayloadContext(mediaRoot: mediaRoot, label: relative, refresh: refresh))
        guard let bytes else {
            // Not a payload: nothing to rewrite. A previous run's output for it would now be stale.
            unlink(outputPath)
            return BatchItem(file: relative, output: nil, outcome: outcome, writeError: nil)
        }
        do {
            try writeAtomically(Data(bytes), to: outputPath)
            return BatchItem(file: relative, output: relative, outcome: outcome, writeError: nil)
        } catch {
            return BatchItem(
                file: relative, output: nil, outcome: outcome,
                writeError: "\(outputPath): \(error.localizedDescription)")
        }
    }
}

/// One payload file's result in report.json.
struct BatchItem: Codable {
    var file: String
    /// Path of the rewritten payload under --out (nil when none was written).
    var output: String?
    var outcome: Outcome
    var writeError: String?

    enum CodingKeys: String, CodingKey {
        case file, output, outcome
        case writeError = "write_error"
    }
}

struct BatchReport: Encodable {
    var version: String
    var input: String
    var out: String
    var store: String
    var baseURL: String
    var summary: BatchSummary
    var items: [BatchItem]

    enum CodingKeys: String, CodingKey {
        case version, input, out, store, summary, items
        case baseURL = "base_url"
    }
}

struct BatchSummary: Encodable {
    var payloads: Int
    var byStatus: [String: Int]
    var byReason: [String: Int]
    var cacheHits: Int
    var sourceBytes: Int64
    var attachmentBytes: Int64
    var bytesSaved: Int64
    var seconds: Double

    enum CodingKeys: String, CodingKey {
        case payloads, seconds
        case byStatus = "by_status"
        case byReason = "by_reason"
        case cacheHits = "cache_hits"
        case sourceBytes = "source_bytes"
        case attachmentBytes = "attachment_bytes"
        case bytesSaved = "bytes_saved"
    }

    init(items: [BatchItem], seconds: Double) {
        payloads = items.count
        byStatus = Dictionary(grouping: items, by: { $0.outcome.status.rawValue }).mapValues(\.count)
        byReason = Dictionary(grouping: items.compactMap(\.outcome.reason), by: { $0 }).mapValues(\.count)
        cacheHits = items.filter { $0.outcome.cacheHit == true }.count
        let converted = items.filter(\.outcome.status.delivered)
        sourceBytes = converted.compactMap(\.outcome.sourceBytes).reduce(0, +)
        attachmentBytes = converted.compactMap(\.outcome.attachment?.bytes).reduce(0, +)
        bytesSaved = sourceBytes - attachmentBytes
        self.seconds = (seconds * 1000).rounded() / 1000
    }

    func table(out: String) -> String {
        var lines = ["", "PushMedia batch: \(payloads) payloads in \(String(format: "%.2f", seconds)) s"]
        lines.append("  status        count")
        for status in OutcomeStatus.allCases {
            lines.append(
                "  " + status.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)
                    + String(format: "%6d", byStatus[status.rawValue] ?? 0))
        }
        if !byReason.isEmpty {
            lines.append(
                "  reasons: "
                    + byReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        lines.append(
            "  media: \(formatBytes(sourceBytes)) in → \(formatBytes(attachmentBytes)) out (saved "
                + "\(formatBytes(bytesSaved))); cache hits \(cacheHits)"
        )
        lines.append("  report: \(out)/report.json, \(out)/report.html")
        return lines.joined(separator: "\n")
    }

    /// The same numbers for report.html's header.
    var forHTML: HTMLReport.Summary {
        HTMLReport.Summary(
            payloads: payloads, byStatus: byStatus, byReason: byReason, cacheHits: cacheHits,
            sourceBytes: sourceBytes, attachmentBytes: attachmentBytes, seconds: seconds)
    }
}

/// A progress bar on a terminal, one plain line per payload otherwise (both on stderr).
final class ProgressDisplay: @unchecked Sendable {
    private let total: Int
    private var done = 0
    private let tty = isatty(STDERR_FILENO) == 1

    init(total: Int) { self.total = total }

    func advance(_ item: BatchItem) {
        done += 1
        if tty {
            let bar = Self.bar(done: done, total: total)
            let name = item.file.count > 40 ? "…" + item.file.suffix(39) : item.file
            FileHandle.standardError.write(Data("\r\u{1B}[2K[\(bar)] \(done)/\(total) \(name)".utf8))
        } else {
            FileHandle.writeError("[\(done)/\(total)] " + humanLine(item.outcome, label: item.file))
        }
    }

    /// The bar of `done` out of `total`, 30 characters wide: a local batch's and a fleet batch's.
    static func bar(done: Int, total: Int) -> String {
        let width = 30
        let filled = total == 0 ? width : done * width / total
        return String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
    }

    func finish() {
        if tty { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}
