import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaFleet

/// A batch shared by the fleet's workers (`batch --fleet NAME`, `work --fleet NAME`): the
/// payload files go into the fleet's queue (`FleetQueue`), any number of workers process them,
/// and `batch --fleet NAME --status` writes the outputs and the report a local batch writes.
enum FleetBatch {
    /// A batch's name: what a person types, bounded.
    static func validate(name: String) throws {
        let allowed = { (c: Character) in c.isASCII && (c.isLetter || c.isNumber || "-_.".contains(c)) }
        guard (1...100).contains(name.count), name.allSatisfy(allowed) else {
            throw ValidationError("--fleet: a batch name of 1 to 100 letters, digits, '-', '_' or '.', not \(name)")
        }
    }

    /// The queue of `config`'s fleet database; a usage error without one.
    static func openQueue(_ config: PushMediaConfig) async throws -> FleetQueue {
        do {
            guard let database = try FleetDatabase(config: config) else {
                throw ValidationError("--fleet needs the fleet's database: --fleet-db (or PUSHMEDIA_FLEET_DB)")
            }
            return try await FleetQueue.open(database, logger: Logger(label: "pushmedia"))
        } catch let error as FleetError {
            FileHandle.writeError("pushmedia: \(error)")
            throw error.isOutage ? Exit.ioError : Exit.usage
        }
    }

    /// `batch --fleet NAME DIR|MANIFEST`: every item of `input` into the queue.
    static func enqueue(name: String, input: BatchInput, config: PushMediaConfig) async throws {
        let names = input.names
        guard !names.isEmpty else {
            FileHandle.writeError("pushmedia: \(input.empty)")
            throw Exit.ioError
        }
        var items: [(file: String, payload: [UInt8])] = []
        for (index, file) in names.enumerated() {
            guard let data = input.payload(index) else {
                FileHandle.writeError("pushmedia: \(input.location)/\(file): cannot read the file")
                throw Exit.ioError
            }
            guard data.count <= FleetQueue.payloadLimit else {
                FileHandle.writeError(
                    "pushmedia: \(input.location)/\(file): \(data.count) bytes, over the fleet queue's "
                        + "\(FleetQueue.payloadLimit) per payload")
                throw Exit.dataError
            }
            items.append((file, Array(data)))
        }
        let queue = try await openQueue(config)
        defer { Task { await queue.close() } }
        do { try await queue.enqueue(name: name, input: input.location, items: items) } catch {
            FileHandle.writeError("pushmedia: batch --fleet \(name): \(error)")
            throw Exit.ioError
        }
        print(
            "queued \(items.count) payloads as the fleet batch \(name): run `pushmedia work --fleet \(name)` on any "
                + "number of nodes, and `pushmedia batch --fleet \(name) --status` for its progress")
    }

    /// `batch --fleet NAME --status [--wait]`: the progress, and once done the outputs and report.
    static func status(name: String, config: PushMediaConfig, out: String, wait: Bool) async throws {
        let queue = try await openQueue(config)
        defer { Task { await queue.close() } }
        var progress: FleetQueue.Progress
        while true {
            do {
                guard let found = try await queue.progress(name: name) else {
                    FileHandle.writeError("pushmedia: there is no fleet batch \(name)")
                    throw Exit.usage
                }
                progress = found
            } catch let error as FleetError {
                FileHandle.writeError("pushmedia: batch --fleet \(name): \(error)")
                throw Exit.ioError
            }
            show(progress)
            if progress.finished || !wait { break }
            try await Task.sleep(for: .seconds(1))
        }
        guard progress.finished else {
            print(
                "fleet batch \(name): \(progress.done) of \(progress.total) done, \(progress.working) being worked on")
            throw ExitCode(75)  // EX_TEMPFAIL: ask again
        }
        if isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
        let results: [FleetQueue.Result]
        do { results = try await queue.results(name: name) } catch {
            FileHandle.writeError("pushmedia: batch --fleet \(name): \(error)")
            throw Exit.ioError
        }
        let pipeline = try await openPipeline(config)
        let outRoot = URL(fileURLWithPath: out).standardizedFileURL
        BatchCommand.removeInterruptedWrites(under: outRoot)
        var items: [BatchItem] = []
        var failedWrites = 0
        for result in results {
            let outcome: Outcome
            do { outcome = try JSONDecoder().decode(Outcome.self, from: Data(result.outcome)) } catch {
                FileHandle.writeError("pushmedia: fleet batch \(name), \(result.file): an outcome that does not read")
                throw Exit.dataError
            }
            let outputPath = outRoot.appendingPathComponent(result.file).path
            guard let output = result.output else {
                unlink(outputPath)
                items.append(BatchItem(file: result.file, output: nil, outcome: outcome, writeError: nil))
                continue
            }
            do {
                try writeAtomically(Data(output), to: outputPath)
                items.append(BatchItem(file: result.file, output: result.file, outcome: outcome, writeError: nil))
            } catch {
                failedWrites += 1
                items.append(
                    BatchItem(
                        file: result.file, output: nil, outcome: outcome,
                        writeError: "\(outputPath): \(error.localizedDescription)"))
            }
        }
        try BatchCommand.writeReports(
            items, seconds: progress.seconds, input: progress.input, outRoot: outRoot, pipeline: pipeline,
            mediaRoot: config.mediaRoot ?? FleetWorker.mediaRoot(ofLocation: progress.input), out: out)
        if failedWrites > 0 { throw Exit.ioError }
    }

    /// `batch --fleet NAME --delete`: the batch and its items out of the queue.
    static func delete(name: String, config: PushMediaConfig) async throws {
        let queue = try await openQueue(config)
        defer { Task { await queue.close() } }
        let items: Int?
        do { items = try await queue.delete(name: name) } catch {
            FileHandle.writeError("pushmedia: batch --fleet \(name) --delete: \(error)")
            throw Exit.ioError
        }
        guard let items else {
            FileHandle.writeError("pushmedia: there is no fleet batch \(name)")
            throw Exit.usage
        }
        print("deleted the fleet batch \(name) and its \(items) items")
    }

    /// A progress bar on a terminal, a line otherwise.
    static func show(_ progress: FleetQueue.Progress) {
        let line = "\(progress.done)/\(progress.total) done, \(progress.working) being worked on"
        if isatty(STDERR_FILENO) == 1 {
            let bar = ProgressDisplay.bar(done: progress.done, total: progress.total)
            FileHandle.standardError.write(Data("\r\u{1B}[2K[\(bar)] \(line)".utf8))
        } else {
            FileHandle.writeError("fleet batch \(progress.name): \(line)")
        }
    }
}
