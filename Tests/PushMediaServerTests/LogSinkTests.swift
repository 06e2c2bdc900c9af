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

    /// A span's ids are written among a line's fields where their keys sort, in hex; a key the
    /// line has already keeps the line's value.
    @Test func aSpansIDsSitAmongTheFieldsInKeyOrder() throws {
        let trace = TraceParent(
            traceHigh: 0x4bf9_2f35_77b3_4da6, traceLow: 0xa3ce_929d_0e0e_4736, parentID: 0x00f0_67aa_0ba9_02b7,
            sampled: true)
        let metadata = [("a", "1"), ("span_id", "own"), ("trace_x", "2"), ("z", "3")]
        func line(_ format: LogSink.Format, _ metadata: [(String, String)], _ trace: TraceParent?) -> String {
            var buffer: [UInt8] = []
            LogLine.write(
                into: &buffer, format: format, time: Array("T".utf8), level: .info, label: "l", message: "m",
                metadata: metadata, trace: trace, source: "s")
            return String(decoding: buffer, as: UTF8.self)
        }
        #expect(
            line(.text, metadata, trace)
                == "T info l: a=1 span_id=own trace_flags=01 trace_id=4bf92f3577b34da6a3ce929d0e0e4736 trace_x=2 z=3 [s] m\n"
        )
        #expect(line(.text, metadata, nil) == "T info l: a=1 span_id=own trace_x=2 z=3 [s] m\n")
        let unsampled = TraceParent(traceHigh: 1, traceLow: 2, parentID: 3, sampled: false)
        #expect(
            line(.text, [], unsampled)
                == "T info l: span_id=0000000000000003 trace_flags=00 trace_id=00000000000000010000000000000002 [s] m\n"
        )
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(line(.json, metadata, trace).utf8)) as? [String: String])
        #expect(object["span_id"] == "own" && object["trace_flags"] == "01" && object["z"] == "3")
        #expect(object["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" && object.count == 10)
        let json = line(.json, [("z", "3")], trace)
        #expect(
            json.hasSuffix(
                #","span_id":"00f067aa0ba902b7","trace_flags":"01","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","z":"3"}"#
                    + "\n"))
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
