import ArgumentParser
import Foundation
import PushMedia

struct ProcessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "process",
        abstract: "Rewrite one payload: the new payload goes to stdout, one line about it to stderr.",
        discussion: "Exit status: 0 when a payload was written, 64 usage error, 65 invalid JSON, 74 I/O error."
    )

    @Argument(help: "Payload file, or - for standard input.")
    var input: String = "-"
    @Option(help: "Also write the outcome as JSON to this file.")
    var report: String?
    @Flag(help: "Pretty-print the payload (default: compact, as sent to APNs).")
    var pretty = false
    @Flag(
        help: "Revalidate cached media with their origins even when fresh (a 304 or the same bytes cost no transcode).")
    var refresh = false
    @OptionGroup var options: SharedOptions

    func run() async throws {
        let config = try options.config()
        let data: Data
        do {
            // `readToEnd` throws where `readDataToEndOfFile` traps (standard input a folder).
            data =
                input == "-"
                ? try FileHandle.standardInput.readToEnd() ?? Data() : try Data(contentsOf: URL(fileURLWithPath: input))
        } catch {
            let name = input == "-" ? "standard input" : input
            FileHandle.writeError("pushmedia: \(name): cannot read: \(plainWords(error))")
            throw Exit.ioError
        }
        let pipeline = try await openPipeline(config)
        let directory =
            input == "-"
            ? FileManager.default.currentDirectoryPath : URL(fileURLWithPath: input).deletingLastPathComponent().path
        let label = input == "-" ? "stdin" : input
        let result: PipelineResult
        do {
            result = try await pipeline.process(
                data, context: PayloadContext(mediaRoot: config.mediaRoot ?? directory, label: label, refresh: refresh))
        } catch {
            FileHandle.writeError("pushmedia: \(label): \(error)")
            throw Exit.dataError
        }
        var output = pretty ? JSONValue.object(result.payload).prettySerialized() : result.bytes
        if !pretty { output.append(0x0A) }
        FileHandle.standardOutput.write(Data(output))
        FileHandle.writeError(humanLine(result.outcome, label: label))
        if let report {
            do { try writeAtomically(reportJSON(result.outcome), to: report) } catch {
                FileHandle.writeError("pushmedia: \(report): cannot write report: \(error.localizedDescription)")
                throw Exit.ioError
            }
        }
    }
}
