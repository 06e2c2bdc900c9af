import CoreMetrics
import Logging
import PushMedia
import PushMediaTrace
import ServiceLifecycle
import Tracing

/// The process's tracer when `--otel-endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) is given:
/// PushMedia's own (`PushMediaTracer`), exporting over OTLP/HTTP in batches from a bounded ring
/// (`SpanExporter`). A collector that is down, slow or refusing costs spans, never a push: no
/// request waits on the exporter, spans past the ring (`--otel-max-queue`) are dropped, and every
/// span lost (ring full, or a batch the collector did not take) is counted in
/// `pushmedia_trace_spans_dropped_total`.
struct TracingBackend {
    /// Runs the exporter: first of the services, so it stops last and sends what the others ended.
    let service: any Service
    /// Which work begins a recorded trace, with the tracer its spans go to.
    let sampler: TraceSampler

    /// Sets the process's tracer (`InstrumentationSystem`, once per process), counting lost spans
    /// with `factory`; the exporter's warnings go to `logger`.
    init(config: TracingConfig, exportURL: String, factory: any MetricsFactory, logger: Logger) throws {
        let settings = SpanExporter.Settings(
            url: exportURL, headers: config.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            serviceName: config.serviceName, resourceAttributes: config.resourceAttributes,
            maxQueue: config.maxQueue, scheduleDelay: .milliseconds(config.scheduleDelayMilliseconds))
        let lost = Counter(label: "pushmedia_trace_spans_dropped_total", factory: factory)
        let exporter = SpanExporter(settings: settings, lost: lost, logger: logger)
        let tracer = PushMediaTracer(exporter: exporter)
        InstrumentationSystem.bootstrap(tracer)
        sampler = TraceSampler(rule: config.sampler, ratio: config.samplerRatio, tracer: tracer)
        service = SpanExportService(exporter: exporter)
    }
}

extension TracingConfig {
    /// What puts the current span's `trace_id` and `span_id` on a log line, when its trace is
    /// recorded (the ids of one that is not lead to no trace): nil with traces off.
    public var logIDs: (@Sendable () -> TraceParent?)? {
        exportURL == nil ? nil : PushMediaTracer.logIDs
    }
}
