import Synchronization
import Tracing

/// Which work begins a recorded trace: a request to the hook or a media URL, a relayed push, a
/// batch item a fleet worker takes. OpenTelemetry's samplers (`OTEL_TRACES_SAMPLER`), decided here
/// before any span exists: work that is not traced costs one header lookup and, without a caller's
/// `traceparent`, one draw of a random number; it starts no span, makes no ids and carries no
/// context (so it sends no `traceparent` to an origin either). The process's tracer records every
/// span it is asked for: the decision is made here, once per trace. Built once by the server, with
/// the process's tracer, and handed to each place where work begins; nil where traces are off.
/// A class: copied as one reference.
public final class TraceSampler: Sendable {
    /// OpenTelemetry's names (`OTEL_TRACES_SAMPLER`).
    public enum Rule: String, CaseIterable, Sendable {
        case alwaysOn = "always_on"
        case alwaysOff = "always_off"
        case traceIDRatio = "traceidratio"
        case parentBasedAlwaysOn = "parentbased_always_on"
        case parentBasedAlwaysOff = "parentbased_always_off"
        case parentBasedTraceIDRatio = "parentbased_traceidratio"
    }

    public let rule: Rule
    /// The share of traces the `*traceidratio` rules record, 0 to 1.
    public let ratio: Double
    /// A trace id whose last 8 bytes (little-endian, as OpenTelemetry's SDKs read them) are below
    /// this is recorded by the ratio rules.
    private let bound: UInt64
    private let draws: Atomic<UInt64>
    /// Where the spans of the traces it records go: the process's tracer, reached without the
    /// lock of `InstrumentationSystem`'s global (and from each recorded trace's context, which
    /// carries it: `PipelineTrace.child`).
    public let tracer: any Tracer
    /// What each trace it records carries in its context (`PipelineTrace.Recording`), and the
    /// first context of a trace that begins with no other current: made once, so that a trace's
    /// start adds nothing to a context when there is no caller's to join.
    private let recording: PipelineTrace.Recording
    private let recordedTopLevel: ServiceContext

    /// `tracer`: the process's, once it is set (`InstrumentationSystem.bootstrap`).
    public init(rule: Rule, ratio: Double = 1, tracer: any Tracer = InstrumentationSystem.tracer) {
        self.tracer = tracer
        self.rule = rule
        self.ratio = min(max(ratio, 0), 1)
        bound = self.ratio == 0 ? .min : self.ratio == 1 ? .max : UInt64(self.ratio * Double(UInt64.max))
        var seed = SystemRandomNumberGenerator()
        draws = Atomic(seed.next())
        recording = PipelineTrace.Recording(tracer: tracer)
        var topLevel = ServiceContext.topLevel
        PipelineTrace.record(by: recording, in: &topLevel)
        recordedTopLevel = topLevel
    }

    /// Whether work whose caller sent `traceparent` (nil: none, or not one W3C defines) is traced:
    /// the parent-based rules follow the caller's sampled flag; the ratio rules read the caller's
    /// trace id as every OpenTelemetry SDK does, so that services with the same ratio agree, and
    /// draw for a trace that begins here.
    public func samples(traceparent: String?) -> Bool {
        let parent = traceparent.flatMap(TraceParent.init)
        switch rule {
        case .alwaysOn: return true
        case .alwaysOff: return false
        case .parentBasedAlwaysOn: return parent?.sampled ?? true
        case .parentBasedAlwaysOff: return parent?.sampled ?? false
        case .parentBasedTraceIDRatio: return parent?.sampled ?? chosen(draw())
        case .traceIDRatio: return chosen(parent?.ratioValue ?? draw())
        }
    }

    /// The span of work that begins here at the request of a caller whose propagated fields
    /// `carrier` holds (a request's headers, a push's), joined to the caller's trace: nil when
    /// the work is not traced.
    public func start<Carrier, Fields: Extractor>(
        _ name: String, ofKind kind: SpanKind, from carrier: Carrier, using fields: Fields
    ) -> (any Span)? where Fields.Carrier == Carrier {
        guard samples(traceparent: fields.extract(key: "traceparent", from: carrier)) else { return nil }
        var parent = recorded(ServiceContext.current)
        tracer.extract(carrier, into: &parent, using: fields)
        return tracer.startSpan(name, context: parent, ofKind: kind)
    }

    /// The span of work no caller sent (a batch item, a purge heard from another node), a trace
    /// of its own: nil when it is not traced.
    public func start(_ name: String, ofKind kind: SpanKind) -> (any Span)? {
        samples(traceparent: nil) ? tracer.startSpan(name, context: recordedTopLevel, ofKind: kind) : nil
    }

    /// The context of a trace's first span, made from `current` (nil: none): it, and every
    /// context under it, carries the tracer (`PipelineTrace.child` starts a child span only in a
    /// context that has one).
    private func recorded(_ current: ServiceContext?) -> ServiceContext {
        guard var context = current else { return recordedTopLevel }
        PipelineTrace.record(by: recording, in: &context)
        return context
    }

    private func chosen(_ value: UInt64) -> Bool {
        bound == .max || value < bound
    }

    /// The next of a SplitMix64 sequence, seeded once from the system's generator: a trace that
    /// begins here is recorded as one whose new trace id falls below the bound would be. Each
    /// draw is one atomic add: no lock on the way of work that is not traced.
    private func draw() -> UInt64 {
        var z = draws.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A W3C `traceparent` (`00-<trace id>-<parent id>-<flags>`): the trace id's 16 bytes as two
/// big-endian halves, the parent span's 8 bytes and the sampled flag. What samplers read, and
/// what a tracer joins a caller's trace by and sends on. Nil for one W3C calls invalid (a tracer
/// ignores it too).
public struct TraceParent: Sendable, Hashable {
    /// The trace id's first 8 bytes, big-endian.
    public var traceHigh: UInt64
    /// The trace id's last 8 bytes, big-endian.
    public var traceLow: UInt64
    /// The parent span's id (the caller's span).
    public var parentID: UInt64
    public var sampled: Bool

    public init(traceHigh: UInt64, traceLow: UInt64, parentID: UInt64, sampled: Bool) {
        self.traceHigh = traceHigh
        self.traceLow = traceLow
        self.parentID = parentID
        self.sampled = sampled
    }

    public init?(_ field: String) {
        var text = field
        guard let parsed = text.withUTF8({ Self.parse($0) }) else { return nil }
        self = parsed
    }

    /// What the ratio samplers compare: bytes 8 to 15 of the trace id, the first the least
    /// significant (as OpenTelemetry's SDKs read them).
    var ratioValue: UInt64 { traceLow.byteSwapped }

    /// The field's text (version 00).
    public var header: String {
        String(unsafeUninitializedCapacity: 55) { text in
            text[0] = UInt8(ascii: "0")
            text[1] = UInt8(ascii: "0")
            text[2] = UInt8(ascii: "-")
            Self.write(traceHigh, into: text, at: 3)
            Self.write(traceLow, into: text, at: 19)
            text[35] = UInt8(ascii: "-")
            Self.write(parentID, into: text, at: 36)
            text[52] = UInt8(ascii: "-")
            text[53] = UInt8(ascii: "0")
            text[54] = sampled ? UInt8(ascii: "1") : UInt8(ascii: "0")
            return 55
        }
    }

    /// The trace id as 32 lowercase hex digits (W3C's and OpenTelemetry's form).
    public var traceIDText: String {
        String(unsafeUninitializedCapacity: 32) { text in
            Self.write(traceHigh, into: text, at: 0)
            Self.write(traceLow, into: text, at: 16)
            return 32
        }
    }

    /// An 8-byte span id as 16 lowercase hex digits.
    public static func text(ofSpanID id: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { text in
            write(id, into: text, at: 0)
            return 16
        }
    }

    /// Appends `value` as 16 lowercase hex digits to `bytes` (a log line's ids, written in place).
    public static func append(hex value: UInt64, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: 16))
        bytes.withUnsafeMutableBufferPointer { write(value, into: $0, at: start) }
    }

    private static func write(_ value: UInt64, into text: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        let digits: StaticString = "0123456789abcdef"
        for index in 0..<16 {
            let nibble = Int(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
            text[start + index] = digits.utf8Start[nibble]
        }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> TraceParent? {
        let dash = UInt8(ascii: "-")
        // Version 00 is exactly 55 characters; a later version may add fields after a dash.
        guard bytes.count >= 55, bytes[2] == dash, bytes[35] == dash, bytes[52] == dash,
            let version = hex(bytes, from: 0, count: 2), let high = hex(bytes, from: 3, count: 16),
            let low = hex(bytes, from: 19, count: 16), let parent = hex(bytes, from: 36, count: 16),
            let flags = hex(bytes, from: 53, count: 2)
        else { return nil }
        guard version != 0xFF, bytes.count == 55 || (version != 0 && bytes[55] == dash), high | low != 0,
            parent != 0
        else { return nil }
        return TraceParent(traceHigh: high, traceLow: low, parentID: parent, sampled: flags & 1 == 1)
    }

    /// `count` (at most 16) lowercase hex digits from `start`, or nil.
    private static func hex(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, count: Int) -> UInt64? {
        var value: UInt64 = 0
        for byte in bytes[start..<start + count] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
