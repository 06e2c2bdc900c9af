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

    /// Sets the process's tracer (`InstrumentationSystem`, once per process), counting lost spans
    /// with `factory`; the exporter's warnings go to `logger`.
    init(config: TracingConfig, exportURL: String, factory: any MetricsFactory, logger: Logger) throws {
        let settings = SpanExporter.Settings(
            url: exportURL, headers: config.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            serviceName: config.serviceName, resourceAttributes: config.resourceAttributes,
            maxQueue: config.maxQueue)
        let lost = Counter(label: "pushmedia_trace_spans_dropped_total", factory: factory)
        let exporter = SpanExporter(settings: settings, lost: lost, logger: logger)
        InstrumentationSystem.bootstrap(PushMediaTracer(exporter: exporter))
        service = SpanExportService(exporter: exporter)
    }
}

extension TracingConfig {
    /// What puts the current span's `trace_id` and `span_id` on a log line, when its trace is
    /// recorded (the ids of one that is not lead to no trace): nil with traces off.
    public var logFields: Logger.MetadataProvider? {
        guard exportURL != nil else { return nil }
        let fields = PushMediaTracer.logFields
        return Logger.MetadataProvider { PipelineTrace.recording ? fields.get() : [:] }
    }
}
