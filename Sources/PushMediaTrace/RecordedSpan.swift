import PushMedia
import Synchronization
import Tracing

/// A span this process records: its name, attributes, events, links and status until it ends,
/// then one `FinishedSpan` put in the exporter's ring. Its state is its own, behind its own
/// lock, which only the task doing the span's work takes: the tracer keeps no table of live
/// spans, and ending a span wakes no one. (Sendable as its base class is: what changes is
/// behind its lock.)
public final class RecordedSpan: SpanFieldsOwner, Span, @unchecked Sendable {
    /// The context the span was started in: the span's own (`context`) is made from it the first
    /// time it is asked for, and a child's from it and the child's identity (`child`), so a span
    /// whose work runs in no context of its own (a cache hit's `pushmedia.resolve`, a relayed
    /// push answered from the memo and its upstream span) copies no context.
    private let parent: ServiceContext
    private let kind: SpanKind
    private let identity: SpanIdentity
    /// The id of the span it is under (0: the trace's first).
    let parentID: UInt64
    private let start: UInt64
    private let exporter: SpanExporter
    /// The tracer's ids, for the span's children (`child`).
    private let ids: SpanIDs
    private let state: Mutex<State>

    private struct State {
        var name: String
        /// Room for the most any of PushMedia's spans carries, set once.
        var attributes = SpanFields(minimumCapacity: 12)
        var events: [SpanEvent] = []
        var links: [SpanLink] = []
        var status: SpanStatus?
        var ended = false
        /// The span's context, once made.
        var context: ServiceContext?
    }

    /// A span started in `parent`, under the span `above` (the trace's first here when nil: its
    /// trace id is made then), with a new id from `ids`.
    init(
        name: String, kind: SpanKind, parent: ServiceContext, under above: SpanIdentity?, start: UInt64,
        exporter: SpanExporter, ids: SpanIDs
    ) {
        self.parent = parent
        self.kind = kind
        identity = SpanIdentity(
            traceHigh: above?.traceHigh ?? ids.next(), traceLow: above?.traceLow ?? ids.next(), spanID: ids.next(),
            sampled: true, traceState: above?.traceState, recorded: true)
        parentID = above?.spanID ?? 0
        self.start = start
        self.exporter = exporter
        self.ids = ids
        state = Mutex(State(name: name))
        super.init()
    }

    /// A child's context is the one this span was started in with the child's identity, as it
    /// would be made from this span's: this span's own is not made for it.
    override public func child(_ name: String, ofKind kind: SpanKind) -> (any Span)? {
        RecordedSpan(
            name: name, kind: kind, parent: parent, under: identity,
            start: DefaultTracerClock.now.nanosecondsSinceEpoch,
            exporter: exporter, ids: ids)
    }

    /// The context the span gives its work: the one it was started in, with the span's identity.
    public var context: ServiceContext {
        state.withLock { state in
            if let context = state.context { return context }
            var context = parent
            context.spanIdentity = identity
            state.context = context
            return context
        }
    }

    override public var logIDs: TraceParent? { identity.traceParent }

    public var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { if !$0.ended { $0.name = newValue } } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes.attributes } }
        set { state.withLock { if !$0.ended { $0.attributes = SpanFields(newValue) } } }
    }

    override public func editFields(_ update: (inout SpanFields) -> Void) {
        state.withLock { if !$0.ended { update(&$0.attributes) } }
    }

    public var isRecording: Bool { state.withLock { !$0.ended } }

    public func setStatus(_ status: SpanStatus) {
        state.withLock { state in
            guard !state.ended else { return }
            // OpenTelemetry: Ok is final; an error does not replace it.
            if state.status?.code == .ok { return }
            state.status = status
        }
    }

    public func addEvent(_ event: SpanEvent) {
        state.withLock { if !$0.ended { $0.events.append(event) } }
    }

    public func addLink(_ link: SpanLink) {
        state.withLock { if !$0.ended { $0.links.append(link) } }
    }

    /// OpenTelemetry's `exception` event: the error's type and description.
    public func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        var fields = attributes
        fields["exception.type"] = String(describing: type(of: error))
        fields["exception.message"] = String(describing: error)
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: fields))
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let end = instant().nanosecondsSinceEpoch
        let finished: FinishedSpan? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            return FinishedSpan(
                name: state.name, kind: kind, identity: identity, parentID: parentID, start: start, end: end,
                attributes: state.attributes, events: state.events, links: state.links, status: state.status)
        }
        if let finished { exporter.add(finished) }
    }
}
