import Foundation
import Tracing

/// The spans of a payload's way through the pipeline, and the attributes an operator filters
/// on. Spans go to the process's tracer (`InstrumentationSystem`): a no-op unless `serve` was
/// given an OTLP endpoint. What a span may carry is decided here, once: an origin's host and
/// port, never its path, query or credentials; types, sizes, statuses and reason codes, never
/// a message (messages may quote a URL).
public enum PipelineTrace {
    /// `pushmedia.payload`: one payload through `Pipeline.process`.
    public static let payload = "pushmedia.payload"
    /// `pushmedia.resolve`: one media reference, from the cache or through a job.
    public static let resolve = "pushmedia.resolve"
    /// `pushmedia.rewrite`: the payload rewritten with its answers.
    public static let rewrite = "pushmedia.rewrite"

    /// What a recorded trace's context carries: the tracer of its spans, set by the sampler in
    /// the context of a trace's first span (the server span, a relayed push's, a batch item's),
    /// and so in every context under it. A trace that is not sampled (or no trace at all: no
    /// tracer, or the library called outside `serve`) has none and starts no child span. Made
    /// once by each sampler: a class reference, which the context keeps without a box of its own.
    final class Recording: Sendable {
        let tracer: any Tracer

        init(tracer: any Tracer) { self.tracer = tracer }
    }

    private enum Recorder: ServiceContextKey {
        typealias Value = Recording
        static let nameOverride: String? = "pushmedia-recorder"
    }

    /// Marks `context` as a recorded trace's, whose spans `recording`'s tracer records.
    static func record(by recording: Recording, in context: inout ServiceContext) {
        context[Recorder.self] = recording
    }

    /// The context a span gives its work: the span's own (carrying the trace's `Recording`, when
    /// the trace is recorded).
    public static func context(of span: any Span) -> ServiceContext { span.context }

    /// Whether `context` belongs to a recorded trace.
    public static func isRecorded(_ context: ServiceContext) -> Bool { context[Recorder.self] != nil }

    /// A span `name` under the current one when its trace is recorded; nil otherwise, at the
    /// cost of one task-local read.
    public static func child(_ name: String, ofKind kind: SpanKind = .internal) -> (any Span)? {
        guard let context = ServiceContext.current else { return nil }
        return child(name, in: context, ofKind: kind)
    }

    /// A span `name` under `parent` when its trace is recorded: the tracer's own spans start it
    /// themselves (`SpanFieldsOwner.child`), without making `parent`'s context.
    public static func child(_ name: String, of parent: any Span, ofKind kind: SpanKind = .internal) -> (any Span)? {
        guard parent.isRecording else { return nil }
        if let owner = parent as? SpanFieldsOwner, let span = owner.child(name, ofKind: kind) { return span }
        return child(name, in: parent.context, ofKind: kind)
    }

    private static func child(_ name: String, in context: ServiceContext, ofKind kind: SpanKind) -> (any Span)? {
        guard let recording = context[Recorder.self] else { return nil }
        return recording.tracer.startSpan(name, context: context, ofKind: kind)
    }

    /// The ids a log line written for `span` carries (`span_id`, `trace_flags`, `trace_id`): the
    /// tracer's own spans' (`SpanFieldsOwner.logIDs`), read without making the span's context;
    /// nil for no span, or another tracer's.
    public static func logIDs(of span: (any Span)?) -> TraceParent? {
        (span as? SpanFieldsOwner)?.logIDs
    }

    /// `operation` with `span`'s context current (`context(of:)`: a log line written in it
    /// carries the span's ids when it records), or as it is when there is no span.
    public static func within<T>(_ span: (any Span)?, _ operation: () throws -> T) rethrows -> T {
        guard let span else { return try operation() }
        return try ServiceContext.$current.withValue(context(of: span), operation: operation)
    }

    /// The same, for async work.
    public static func within<T>(
        _ span: (any Span)?, isolation: isolated (any Actor)? = #isolation, _ operation: () async throws -> T
    ) async rethrows -> T {
        guard let span else { return try await operation() }
        return try await ServiceContext.$current.withValue(
            context(of: span), operation: operation, isolation: isolation)
    }

    /// The payload's outcome on its span: status, reason, cache hit, profile, vendor, the
    /// budget, and whether the answer is a best attempt.
    public static func record(_ outcome: Outcome, budget: Duration?, on span: any Span) {
        guard span.isRecording else { return }
        span.editAttributes { attributes in
            attributes["pushmedia.status"] = outcome.primary.status.rawValue
            if let reason = outcome.primary.reason { attributes["pushmedia.reason"] = reason }
            if let hit = outcome.primary.cacheHit { attributes["pushmedia.cache_hit"] = hit }
            attributes["pushmedia.profile"] = outcome.primary.platform
            if let vendor = outcome.vendor { attributes["pushmedia.vendor"] = vendor }
            if let budget { attributes["pushmedia.budget_ms"] = Int(budget.milliseconds) }
            attributes["pushmedia.best_attempt"] = outcome.primary.status == .bestAttempt
            attributes["pushmedia.media_count"] = outcome.media?.count ?? 1
        }
        if outcome.primary.status == .rejected || outcome.primary.status == .bestAttempt {
            // Not an error of the service: the push still goes out. Shown as one in a trace view.
            span.setStatus(SpanStatus(code: .error, message: outcome.label))
        }
    }

    /// The current span's W3C `traceparent` and `tracestate`, as request header fields (none
    /// when no span is current, or traces are off).
    static func propagated() -> [(String, String)] {
        guard let context = ServiceContext.current, let recording = context[Recorder.self] else { return [] }
        var fields: [(String, String)] = []
        recording.tracer.inject(context, into: &fields, using: HeaderPairs())
        return fields
    }

    private struct HeaderPairs: Injector {
        func inject(_ value: String, forKey key: String, into fields: inout [(String, String)]) {
            fields.append((key, value))
        }
    }

    /// An origin's host, port and scheme (`server.address`, `server.port`, `url.scheme`): never
    /// its path or query, which may carry a token.
    static func origin(_ url: String, into attributes: inout SpanFields) {
        guard let parts = SourceParts(url) else { return }
        attributes["server.address"] = parts.host
        attributes["server.port"] = parts.port
        attributes["url.scheme"] = parts.scheme
    }

    /// A resolved media reference's attributes.
    static func record(
        _ resolution: Pipeline.Resolution, profile: PlatformProfile, source: Pipeline.Source, on span: any Span
    ) {
        guard span.isRecording else { return }
        span.editAttributes { attributes in
            attributes["pushmedia.profile"] = profile.id
            if case let .remote(url) = source { origin(url, into: &attributes) }
            switch resolution {
            case let .ready(entry, cacheHit):
                attributes["pushmedia.cache_hit"] = cacheHit
                attributes["pushmedia.status"] = entry.status.rawValue
            case .renewed:
                attributes["pushmedia.cache_hit"] = true
                attributes["pushmedia.revalidated"] = true
            case .stale:
                attributes["pushmedia.cache_hit"] = true
                attributes["pushmedia.stale"] = true
            case let .failed(reason, _, _):
                attributes["pushmedia.cache_hit"] = false
                attributes["pushmedia.reason"] = reason
            case .notReady:
                attributes["pushmedia.cache_hit"] = false
                attributes["pushmedia.reason"] = ReasonCode.budgetExceeded
            case .overloaded:
                attributes["pushmedia.reason"] = ReasonCode.overloaded
            case .storeUnavailable:
                attributes["pushmedia.reason"] = ReasonCode.storeUnavailable
            }
        }
    }

    /// A job step's attributes, from what the step found or made.
    static func record(step: String, job: JobContext, on span: any Span) {
        guard span.isRecording else { return }
        span.editAttributes { attributes in
            switch step {
            case "fetch":
                if case let .remote(url) = job.source { origin(url, into: &attributes) }
                if let status = job.fetchStatus { attributes["http.response.status_code"] = status }
                attributes["http.response.body.size"] = Int(job.bytes)
                if let firstByte = job.firstByte { attributes["pushmedia.fetch.first_byte_ms"] = firstByte }
            case "sniff":
                if let sniff = job.sniff { attributes["pushmedia.source.mime"] = sniff.format.mime }
                attributes["pushmedia.source.bytes"] = Int(job.bytes)
            case "decide":
                switch job.decision {
                case .passthrough: attributes["pushmedia.decision"] = "passthrough"
                case .transcode: attributes["pushmedia.decision"] = "transcode"
                case let .reject(reason, _):
                    attributes["pushmedia.decision"] = "reject"
                    attributes["pushmedia.reason"] = reason
                }
            default:
                guard step.hasPrefix("transcode") else { return }
                if let sniff = job.sniff {
                    attributes["pushmedia.engine"] = sniff.format.kind == .image ? "vips" : "ffmpeg"
                    attributes["pushmedia.source.mime"] = sniff.format.mime
                }
                attributes["pushmedia.source.bytes"] = Int(job.bytes)
                let output: (mime: String, bytes: Int?)? =
                    switch step {
                    case "transcode.thumbnail": job.made.thumbnail.map { ($0.format.mime, $0.bytes.count) }
                    case "transcode.poster": job.made.poster.map { ($0.format.mime, $0.bytes.count) }
                    default:
                        switch job.made.attachment {
                        case let .encoded(image)?: (image.format.mime, image.bytes.count)
                        case let .file(file)?: (file.format.mime, Self.size(file.path))
                        case nil: nil
                        }
                    }
                if let output {
                    attributes["pushmedia.output.mime"] = output.mime
                    if let bytes = output.bytes { attributes["pushmedia.output.bytes"] = bytes }
                }
            }
        }
    }

    private static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }
}
