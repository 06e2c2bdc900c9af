import Foundation
import PushMedia

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `pushmedia serve` as a real process on an ephemeral loopback port (`--port 0`; the port is
/// read from its "listening on" line). The environment's `PUSHMEDIA_*` and `AWS_*` settings are
/// not passed on.
public final class ServeProcess: @unchecked Sendable {
    public let process = Process()
    public let port: Int
    public let stderr = Pipe()
    /// The last 128 KiB or more of what the server wrote to standard error (its log).
    public let log = Locked("")
    private let reader: FileHandle
    /// Standard output read so far.
    public private(set) var output = ""

    public init(arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        process.arguments = ["serve", "--port", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("PUSHMEDIA_") && !$0.key.hasPrefix("AWS_")
        }
        .merging(environment) { _, given in given }
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        // The log: read as it comes (a pipe nobody reads fills, and the server's log writer waits).
        let log = self.log
        stderr.fileHandleForReading.readabilityHandler = { handle in
            let chunk = handle.availableData
            log.withLock { text in
                text += String(decoding: chunk, as: UTF8.self)
                if text.utf8.count > 256 << 10 { text = String(text.suffix(128 << 10)) }
            }
        }
        // "PushMedia listening on http://127.0.0.1:<port>" (other lines may come first).
        reader = stdout.fileHandleForReading
        var text = ""
        guard let line = Self.line(containing: "PushMedia listening on", from: reader, into: &text, timeout: 20),
            let port = line.split(separator: ":").last.flatMap({
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            })
        else {
            process.terminate()
            process.waitUntilExit()
            stderr.fileHandleForReading.readabilityHandler = nil
            let errors =
                log.withLock { $0 } + String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw CocoaError(
                .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "server did not start: \(text) \(errors)"])
        }
        self.port = port
        output = text
    }

    /// Everything the server wrote to standard error (the last 128 KiB or more of it), once it
    /// has exited.
    public func finishedLog() -> String {
        process.waitUntilExit()
        stderr.fileHandleForReading.readabilityHandler = nil
        let rest = stderr.fileHandleForReading.readDataToEndOfFile()
        return log.withLock { $0 } + String(decoding: rest, as: UTF8.self)
    }

    /// The first line of standard output that contains `text` (read further when needed).
    public func line(containing text: String, timeout: TimeInterval = 20) -> String? {
        Self.line(containing: text, from: reader, into: &output, timeout: timeout)
    }

    private static func line(
        containing text: String, from reader: FileHandle, into output: inout String, timeout: TimeInterval
    ) -> String? {
        let giveUp = Date().addingTimeInterval(timeout)
        while true {
            if let line = output.split(separator: "\n").first(where: { $0.contains(text) }),
                output.contains(line + "\n")
            {
                return String(line)
            }
            guard Date() < giveUp else { return nil }
            let chunk = reader.availableData
            if chunk.isEmpty { return nil }
            output += String(decoding: chunk, as: UTF8.self)
        }
    }

    /// One HTTP request with URLSession (20 s timeout); the response and its body.
    public static func request(_ url: URL, method: String = "GET", body: String? = nil, headers: [String: String] = [:])
        async throws -> (HTTPURLResponse, Data)
    {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        request.timeoutInterval = 20
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return (response as! HTTPURLResponse, data)
    }

    public func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// SIGTERM, then the exit status; -1 (after a SIGKILL) when the graceful stop takes
    /// over 15 s, so that a hang fails the test instead of stalling the suite.
    public func stop() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let giveUp = Date().addingTimeInterval(15)
        while process.isRunning, Date() < giveUp { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { if process.isRunning { process.terminate() } }
}
