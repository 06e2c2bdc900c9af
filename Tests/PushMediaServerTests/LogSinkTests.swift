import Foundation
import Logging
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The server's log: lines in order, in both formats, and a destination that stops reading never
/// blocks the lines' writers.
@Suite("Log sink")
struct LogSinkTests {
    /// A pipe: (read end, write end).
    static func pipe() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        #expect(Foundation.pipe(&fds) == 0)
        return (fds[0], fds[1])
    }

    /// Everything readable from `fd` until it is closed, read on a thread of its own (the sink's
    /// `close` blocks until its writer is done, which needs a reader): `wait()` gives it.
    final class Reader: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var text = ""

        init(_ fd: Int32) {
            Thread { [self] in
                text = LogSinkTests.readAll(fd)
                done.signal()
            }.start()
        }

        func wait() -> String {
            done.wait()
            return text
        }
    }

    /// Everything readable from `fd` until it is closed.
    static func readAll(_ fd: Int32) -> String {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            data += buffer[..<count]
        }
        return String(decoding: data, as: UTF8.self)
    }

    @Test func linesInOrderInBothFormats() throws {
        for format in [LogSink.Format.text, .json] {
            let (reader, writer) = Self.pipe()
            let output = Reader(reader)
            let sink = LogSink(format: format, fd: writer)
            var logger = Logger(label: "pushmedia") { SinkLogHandler(label: $0, sink: sink) }
            logger[metadataKey: "node"] = "a"
            for index in 0..<1000 {
                logger.info("push", metadata: ["n": "\(index)", "topic": "com.example \"quoted\"\n"])
            }
            logger.debug("not at info")
            sink.close()
            close(writer)
            let lines = output.wait().split(separator: "\n")
            close(reader)
            #expect(lines.count == 1000, "\(format)")
            for (index, line) in lines.enumerated() {
                switch format {
                case .text:
                    #expect(
                        line.contains(#" info pushmedia: n=\#(index) node=a topic=com.example "quoted"\n ["#), "\(line)"
                    )
                    #expect(line.hasSuffix("[PushMediaServerTests] push"), "\(line)")
                case .json:
                    let object = try #require(
                        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "\(line)")
                    #expect(object["n"] == "\(index)" && object["node"] == "a" && object["message"] == "push")
                    #expect(object["topic"] == "com.example \"quoted\"\n")
                    #expect(object["level"] == "info" && object["time"]?.hasSuffix("Z") == true)
                }
            }
        }
    }

    /// A destination that stops reading (a full pipe): writing lines stays quick, the lines past
    /// the buffer are dropped and counted, and once the destination reads again a warning says how
    /// many.
    @Test func aStuckDestinationDropsLinesAndNeverBlocks() throws {
        let (reader, writer) = Self.pipe()
        let sink = LogSink(format: .text, fd: writer, capacity: 256 * 1024, flushBytes: 16 * 1024)
        let logger = Logger(label: "pushmedia") { SinkLogHandler(label: $0, sink: sink) }
        let line = String(repeating: "x", count: 200)
        let started = ContinuousClock.now
        for index in 0..<20_000 { logger.info("push", metadata: ["n": "\(index)", "pad": "\(line)"]) }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(10), "writing lines took \(elapsed)")
        let dropped = sink.droppedLines
        #expect(dropped > 10_000, "only \(dropped) of 20,000 lines dropped with 320 KB of room")
        let output = Reader(reader)
        sink.close()
        close(writer)
        let text = output.wait()
        close(reader)
        #expect(text.contains("log lines dropped"))
        let kept = text.split(separator: "\n").filter { $0.hasSuffix("] push") }.count
        #expect(kept + dropped == 20_000, "\(kept) written + \(dropped) dropped")
    }
}
