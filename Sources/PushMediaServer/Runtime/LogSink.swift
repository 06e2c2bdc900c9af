import Foundation
import Logging
import PushMedia
import PushMediaRelay

/// Where `pushmedia serve` writes its log: lines are formatted into a buffer in memory and a
/// thread of its own writes them to a file descriptor (standard error) in batches, when
/// `flushBytes` are waiting or `interval` after the first line of a batch. A request never waits
/// for a disk or a pipe: a line that finds `capacity` bytes waiting (the writer is stuck) is
/// dropped and counted (`droppedLines`, the `pushmedia_log_lines_dropped_total` metric), and a
/// warning line says how many once the writer goes on.
public final class LogSink: @unchecked Sendable {
    /// A line's format: `text` (swift-log's `StreamLogHandler` layout) or `json` (one object per line).
    public enum Format: String, Sendable {
        case text, json
    }

    public let format: Format
    /// The ids of the span a line is written in, which it carries as `span_id`, `trace_flags` and
    /// `trace_id`, when traces are on.
    public let traceIDs: (@Sendable () -> TraceParent?)?
    /// The least severe level written (`--log-level`); a reload may change it.
    public let level: Locked<Logger.Level>
    let fd: Int32
    let capacity: Int
    let flushBytes: Int
    let interval: TimeInterval

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var pending: [UInt8] = []
    private var droppedSinceNotice = 0
    private var droppedTotal = 0
    private var stopping = false
    private var stopped = false
    private var clock = TimestampCache()

    /// A sink writing to `fd` (not closed by the sink) from a thread it starts.
    public init(
        format: Format, level: Logger.Level = .info, fd: Int32 = STDERR_FILENO, capacity: Int = 8 << 20,
        flushBytes: Int = 64 << 10, interval: Duration = .milliseconds(5),
        traceIDs: (@Sendable () -> TraceParent?)? = nil
    ) {
        self.format = format
        self.traceIDs = traceIDs
        self.level = Locked(level)
        self.fd = fd
        self.capacity = capacity
        self.flushBytes = flushBytes
        self.interval = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        pending.reserveCapacity(flushBytes * 2)
        let thread = Thread { [self] in drain() }
        thread.name = "pushmedia-log"
        thread.start()
    }

    /// Lines dropped so far because the writer could not keep up.
    public var droppedLines: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedTotal
    }

    /// Appends one line that `write` formats into the buffer (with the current second's time, as
    /// text for `format`); dropped whole when it would take the buffer past `capacity`.
    func line(_ write: (inout [UInt8], _ time: [UInt8]) -> Void) {
        condition.lock()
        let start = pending.count
        guard !stopped, start < capacity else {
            if !stopped { count(dropped: 1) }
            condition.unlock()
            return
        }
        let time = clock.now(format)
        write(&pending, time)
        if pending.count > capacity {
            pending.removeSubrange(start...)
            count(dropped: 1)
        } else if start == 0 || (start < flushBytes && pending.count >= flushBytes) {
            condition.signal()
        }
        condition.unlock()
    }

    private func count(dropped: Int) {
        droppedSinceNotice += dropped
        droppedTotal += dropped
    }

    /// Writes what is waiting and stops the writer; later lines are dropped silently (the process
    /// is ending). Waits for the writer for at most `limit`: a destination that takes nothing
    /// (a full pipe nobody reads) must not keep the process from exiting.
    public func close(within limit: Duration = .seconds(2)) {
        let giveUp = Date(
            timeIntervalSinceNow: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
        condition.lock()
        stopping = true
        condition.signal()
        while !stopped, condition.wait(until: giveUp) {}
        condition.unlock()
    }

    /// The writer: waits for a first line, then up to `interval` (or `flushBytes`) for more, and
    /// writes the batch with the lock released.
    private func drain() {
        var writing: [UInt8] = []
        writing.reserveCapacity(flushBytes * 2)
        condition.lock()
        while true {
            while pending.isEmpty && !stopping { condition.wait() }
            if !stopping && pending.count < flushBytes {
                _ = condition.wait(until: Date(timeIntervalSinceNow: interval))
            }
            if pending.isEmpty && stopping { break }
            swap(&pending, &writing)
            let dropped = droppedSinceNotice
            droppedSinceNotice = 0
            let time = clock.now(format)
            condition.unlock()
            if dropped > 0 {
                LogLine.write(
                    into: &writing, format: format, time: time, level: .warning, label: "pushmedia",
                    message: "log lines dropped: the log's destination did not keep up",
                    metadata: [("dropped", "\(dropped)")], source: "PushMediaServer")
            }
            Self.writeAll(fd, writing)
            writing.removeAll(keepingCapacity: writing.capacity <= flushBytes * 4)
            condition.lock()
        }
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Writes every byte, retrying short writes and interruptions; gives up on other errors
    /// (a closed pipe: the lines have nowhere to go).
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return
                }
                offset += written
            }
        }
    }
}

/// The time of day as a log line writes it, formatted once per second.
struct TimestampCache {
    private var second = -1
    private var text: [UInt8] = []
    private var json: [UInt8] = []

    /// Local time with its offset for text (`2026-11-25T15:36:19+0000`, as `StreamLogHandler`),
    /// UTC for JSON (`2026-11-25T15:36:19Z`).
    mutating func now(_ format: LogSink.Format) -> [UInt8] {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        if spec.tv_sec != second {
            second = spec.tv_sec
            text = Self.format(spec.tv_sec, "%Y-%m-%dT%H:%M:%S%z", utc: false)
            json = Self.format(spec.tv_sec, "%Y-%m-%dT%H:%M:%SZ", utc: true)
        }
        return format == .json ? json : text
    }

    private static func format(_ seconds: Int, _ pattern: String, utc: Bool) -> [UInt8] {
        var time = seconds
        var parts = tm()
        _ = utc ? gmtime_r(&time, &parts) : localtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, pattern, &parts)
        return buffer.prefix(count).map { UInt8(bitPattern: $0) }
    }
}

/// One log line, formatted straight into a buffer.
enum LogLine {
    /// `text`: `<time> <level> <label>: k=v … [<source>] <message>` (the metadata sorted by key, as
    /// `StreamLogHandler` writes it); `json`: `{"time","level","label","message",…metadata}`. The
    /// ids of the line's span (`trace`) are written in place as `span_id`, `trace_flags` and
    /// `trace_id`, each where its key sorts among the metadata's; a key the metadata has already
    /// keeps the metadata's value.
    static func write(
        into buffer: inout [UInt8], format: LogSink.Format, time: [UInt8], level: Logger.Level, label: String,
        message: String, metadata: [(String, String)], trace: TraceParent? = nil, source: String
    ) {
        switch format {
        case .text:
            buffer += time
            buffer.append(0x20)
            buffer += level.rawValue.utf8
            buffer.append(0x20)
            buffer += label.utf8
            buffer.append(UInt8(ascii: ":"))
            fields(metadata, trace: trace, format: format, into: &buffer)
            buffer += " [".utf8
            buffer += source.utf8
            buffer += "] ".utf8
            escaped(message, into: &buffer)
        case .json:
            buffer += #"{"time":""#.utf8
            buffer += time
            buffer += #"","level":"#.utf8
            string(level.rawValue, into: &buffer)
            buffer += #","label":"#.utf8
            string(label, into: &buffer)
            buffer += #","message":"#.utf8
            string(message, into: &buffer)
            fields(metadata, trace: trace, format: format, into: &buffer)
            buffer.append(UInt8(ascii: "}"))
        }
        buffer.append(0x0A)
    }

    /// The keys of a span's ids on a line, sorted.
    static let traceKeys = ["span_id", "trace_flags", "trace_id"]

    /// The metadata (sorted by key) and `trace`'s fields merged in key order: ` k=v` or `,"k":"v"`.
    private static func fields(
        _ metadata: [(String, String)], trace: TraceParent?, format: LogSink.Format, into buffer: inout [UInt8]
    ) {
        // The trace fields written (or left to the metadata's own) so far.
        var next = trace == nil ? traceKeys.count : 0
        for (key, value) in metadata {
            while next < traceKeys.count, traceKeys[next] < key {
                traceField(next, of: trace!, format: format, into: &buffer)
                next += 1
            }
            if next < traceKeys.count, traceKeys[next] == key { next += 1 }
            switch format {
            case .text:
                buffer.append(0x20)
                escaped(key, into: &buffer)
                buffer.append(UInt8(ascii: "="))
                escaped(value, into: &buffer)
            case .json:
                buffer.append(UInt8(ascii: ","))
                string(key, into: &buffer)
                buffer.append(UInt8(ascii: ":"))
                string(value, into: &buffer)
            }
        }
        while next < traceKeys.count {
            traceField(next, of: trace!, format: format, into: &buffer)
            next += 1
        }
    }

    /// `traceKeys[index]` with its value from `trace`, in lowercase hex (nothing to escape).
    private static func traceField(
        _ index: Int, of trace: TraceParent, format: LogSink.Format, into buffer: inout [UInt8]
    ) {
        switch format {
        case .text:
            buffer.append(0x20)
            buffer += traceKeys[index].utf8
            buffer.append(UInt8(ascii: "="))
        case .json:
            buffer += #",""#.utf8
            buffer += traceKeys[index].utf8
            buffer += #"":""#.utf8
        }
        switch index {
        case 0: TraceParent.append(hex: trace.parentID, to: &buffer)
        case 1: buffer += (trace.sampled ? "01" : "00").utf8
        default:
            TraceParent.append(hex: trace.traceHigh, to: &buffer)
            TraceParent.append(hex: trace.traceLow, to: &buffer)
        }
        if format == .json { buffer.append(UInt8(ascii: "\"")) }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func string(_ text: String, into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "\""))
        escaped(text, quotes: true, into: &buffer)
        buffer.append(UInt8(ascii: "\""))
    }

    /// `text` with its control characters escaped as JSON escapes them (so that a value from a
    /// client, such as a header, cannot start a line of its own), and with `quotes` its quotes and
    /// backslashes too.
    static func escaped(_ text: String, quotes: Bool = false, into buffer: inout [UInt8]) {
        var text = text
        let copied = text.withUTF8 { bytes -> Bool in
            for byte in bytes where byte < 0x20 || byte == 0x7F || (quotes && (byte == 0x22 || byte == 0x5C)) {
                return false
            }
            buffer.append(contentsOf: bytes)
            return true
        }
        if copied { return }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                if quotes { buffer.append(UInt8(ascii: "\\")) }
                buffer.append(byte)
            case 0x0A: buffer += #"\n"#.utf8
            case 0x0D: buffer += #"\r"#.utf8
            case 0x09: buffer += #"\t"#.utf8
            case 0..<0x20, 0x7F:
                buffer += #"\u00"#.utf8
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 0x0F)])
            default: buffer.append(byte)
            }
        }
    }
}

/// The log handler of `pushmedia serve`: each line through a `LogSink`, in its format, at its
/// level.
public struct SinkLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    /// The sink's level, for every logger at once (setting it here changes nothing: the process's
    /// level is `--log-level`, read again on SIGHUP).
    public var logLevel: Logger.Level {
        get { sink.level.withLock { $0 } }
        set {}
    }
    let label: String
    let sink: LogSink

    public init(label: String, sink: LogSink) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = event.metadata ?? [:]
        if !metadata.isEmpty { merged.merge(metadata, uniquingKeysWith: { explicit, _ in explicit }) }
        if let error = event.error { merged["error"] = "\(error)" }
        let fields = merged.map { key, value in
            if case let .string(text) = value { return (key, text) }
            return (key, "\(value)")
        }.sorted { $0.0 < $1.0 }
        let trace = sink.traceIDs?()
        let message = "\(event.message)"
        let source = event.source
        let format = sink.format
        sink.line { buffer, time in
            LogLine.write(
                into: &buffer, format: format, time: time, level: event.level, label: label, message: message,
                metadata: fields, trace: trace, source: source)
        }
    }
}

/// The per-request lines of the relays (a push's, a message's): written straight into the log
/// sink, in the format of every other line, without building a `Logger.Metadata` dictionary
/// for each; through `logger` when the process logs without a sink (the library under test).
public struct RequestLines: RelayLines {
    let logger: Logger
    let sink: LogSink?

    public init(logger: Logger, sink: LogSink?) {
        self.logger = logger
        self.sink = sink
    }

    /// One `info` line with `fields`, which the caller gives sorted by key (as lines are written),
    /// and the ids of the request's span (`trace`, when its trace is recorded and the sink writes
    /// trace ids).
    package func info(_ message: String, _ fields: [(String, String)], trace: TraceParent?) {
        guard logger.logLevel <= .info else { return }
        guard let sink else {
            var metadata = Logger.Metadata()
            for (key, value) in fields { metadata[key] = .string(value) }
            logger.info("\(message)", metadata: metadata)
            return
        }
        let (label, format) = (logger.label, sink.format)
        let trace = sink.traceIDs == nil ? nil : trace
        sink.line { buffer, time in
            LogLine.write(
                into: &buffer, format: format, time: time, level: .info, label: label, message: message,
                metadata: fields, trace: trace, source: "PushMediaServer")
        }
    }
}
