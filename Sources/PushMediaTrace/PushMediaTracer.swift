import Logging
import PushMedia
import Tracing

/// The process's tracer when traces are on (`InstrumentationSystem.bootstrap`): it records
/// every span it is asked for (whether a trace is recorded was decided before its first span,
/// `TraceSampler`), joins a caller's trace by W3C Trace Context (`traceparent`, `tracestate`)
/// and sends it on, and hands ended spans to the exporter. A span costs its own object and
/// its ids; the tracer keeps no table of live spans.
public struct PushMediaTracer: Tracer {
    /// The longest `tracestate` passed on (W3C: 32 entries, 512 characters kept at least).
    static let maximumTraceState = 512

    private let exporter: SpanExporter
    private let ids = SpanIDs()

    public init(exporter: SpanExporter) {
        self.exporter = exporter
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> RecordedSpan {
        let context = context()
        return RecordedSpan(
            name: operationName, kind: kind, parent: context, under: context.spanIdentity,
            start: instant().nanosecondsSinceEpoch, exporter: exporter, ids: ids)
    }

    public func forceFlush() { exporter.flush() }

    public func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let field = extractor.extract(key: "traceparent", from: carrier), let parent = TraceParent(field) else {
            return
        }
        let state = extractor.extract(key: "tracestate", from: carrier).flatMap { state in
            state.isEmpty || state.utf8.count > Self.maximumTraceState ? nil : state
        }
        context.spanIdentity = SpanIdentity(
            traceHigh: parent.traceHigh, traceLow: parent.traceLow, spanID: parent.parentID, sampled: parent.sampled,
            traceState: state, recorded: false)
    }

    public func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let identity = context.spanIdentity else { return }
        injector.inject(identity.traceParent.header, forKey: "traceparent", into: &carrier)
        if let state = identity.traceState { injector.inject(state, forKey: "tracestate", into: &carrier) }
    }

    /// The ids a log line carries (`span_id`, `trace_flags`, `trace_id`) of the current span,
    /// when it is one of this tracer's (each is recorded; a caller's ids alone lead to no trace
    /// here): the span's own id as `parentID`, as a request made in it sends them. One lookup in
    /// the context, and nothing made: the line writes the ids itself.
    @Sendable public static func logIDs() -> TraceParent? {
        guard let identity = ServiceContext.current?.spanIdentity, identity.recorded else { return nil }
        return identity.traceParent
    }
}
