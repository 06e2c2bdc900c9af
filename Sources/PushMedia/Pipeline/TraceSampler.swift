import Tracing

/// Which work begins a recorded trace: a request to the hook or a media URL, a relayed push, a
/// batch item a fleet worker takes. OpenTelemetry's samplers (`OTEL_TRACES_SAMPLER`), decided here
/// before any span exists: work that is not traced costs one header lookup and, without a caller's
/// `traceparent`, one draw of a random number; it starts no span, makes no ids and carries no
/// context (so it sends no `traceparent` to an origin either). The process's tracer records every
/// span it is asked for: the decision is made here, once per trace. Built once by the server and
/// handed to each place where work begins; nil where traces are off.
public struct TraceSampler: Sendable {
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
    private let draws: Locked<UInt64>

    public init(rule: Rule, ratio: Double = 1) {
        self.rule = rule
        self.ratio = min(max(ratio, 0), 1)
        bound = self.ratio == 0 ? .min : self.ratio == 1 ? .max : UInt64(self.ratio * Double(UInt64.max))
        var seed = SystemRandomNumberGenerator()
        draws = Locked(seed.next())
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
        var parent = ServiceContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(carrier, into: &parent, using: fields)
        return startSpan(name, context: parent, ofKind: kind)
    }

    /// The span of work no caller sent (a batch item, a purge heard from another node), a trace
    /// of its own: nil when it is not traced.
    public func start(_ name: String, ofKind kind: SpanKind) -> (any Span)? {
        samples(traceparent: nil) ? startSpan(name, context: .topLevel, ofKind: kind) : nil
    }

    private func chosen(_ value: UInt64) -> Bool {
        bound == .max || value < bound
    }

    /// The next of a SplitMix64 sequence, seeded once from the system's generator: a trace that
    /// begins here is recorded as one whose new trace id falls below the bound would be.
    private func draw() -> UInt64 {
        var z = draws.withLock { state in
            state &+= 0x9E37_79B9_7F4A_7C15
            return state
        }
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a sampler reads of a W3C `traceparent` (`00-<trace id>-<parent id>-<flags>`): the sampled
/// flag and the trace id's last 8 bytes. Nil for one W3C calls invalid (a tracer ignores it too).
struct TraceParent {
    var sampled: Bool
    var ratioValue: UInt64

    init?(_ field: String) {
        let bytes = Array(field.utf8)
        // Version 00 is exactly 55 characters; a later version may add fields after a dash.
        guard bytes.count >= 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"),
            bytes[52] == UInt8(ascii: "-")
        else { return nil }
        func hex(_ range: Range<Int>) -> [UInt8]? {
            var values: [UInt8] = []
            values.reserveCapacity(range.count)
            for byte in bytes[range] {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): values.append(byte - UInt8(ascii: "a") + 10)
                default: return nil
                }
            }
            return values
        }
        guard let version = hex(0..<2), let traceID = hex(3..<35), let parentID = hex(36..<52),
            let flags = hex(53..<55)
        else { return nil }
        let isZero = version == [0, 0]
        guard version != [15, 15], bytes.count == 55 || (!isZero && bytes[55] == UInt8(ascii: "-")),
            traceID.contains(where: { $0 != 0 }), parentID.contains(where: { $0 != 0 })
        else { return nil }
        sampled = flags[1] & 1 == 1
        // Bytes 8 to 15 of the id, the first the least significant.
        var value: UInt64 = 0
        for index in 0..<8 {
            let byte = UInt64(traceID[16 + 2 * index] << 4 | traceID[17 + 2 * index])
            value |= byte << (8 * UInt64(index))
        }
        ratioValue = value
    }
}
