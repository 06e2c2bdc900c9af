import CoreMetrics
import Foundation
import Logging
import PushMedia
import ServiceLifecycle
import Tracing

#if OTLP
    import OTel

    /// The process's tracer when `--otel-endpoint` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) is given:
    /// swift-otel's, exporting over OTLP/HTTP in batches from a bounded queue. A collector that is
    /// down, slow or refusing costs spans, never a push: no request waits on the exporter, spans past
    /// the queue (`--otel-max-queue`) are dropped, and every span lost (queue full, or a batch the
    /// collector did not take) is counted in `pushmedia_trace_spans_dropped_total`.
    struct TracingBackend {
        /// Runs the exporter: first of the services, so it stops last and flushes what the others ended.
        let service: any Service

        /// Sets the process's tracer (`InstrumentationSystem`, once per process), counting lost spans
        /// with `factory`; the exporter's own warnings go to `logger`.
        init(config: TracingConfig, exportURL: String, factory: any MetricsFactory, logger: Logger) throws {
            var otel = OTel.Configuration.default
            otel.serviceName = config.serviceName
            otel.resourceAttributes = config.resourceAttributes
            otel.propagators = [.traceContext]
            otel.logs.enabled = false
            otel.metrics.enabled = false
            otel.traces.enabled = true
            otel.traces.exporter = .otlp
            otel.traces.otlpExporter.endpoint = exportURL
            otel.traces.otlpExporter.protocol = .httpProtobuf
            otel.traces.otlpExporter.headers = config.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            // Whether a trace is recorded is decided before its first span (`TraceSampler`): every
            // span the exporter is asked for is recorded. It would read OTEL_TRACES_SAMPLER over this
            // (the settings already hold the variables' values, `checkAgainst(environment:)`).
            otel.traces.sampler = .alwaysOn
            unsetenv("OTEL_TRACES_SAMPLER")
            unsetenv("OTEL_TRACES_SAMPLER_ARG")
            otel.traces.batchSpanProcessor.maxQueueSize = config.maxQueue
            otel.traces.batchSpanProcessor.maxExportBatchSize = min(512, config.maxQueue)
            // A collector that does not take a batch within 5 s (10 s and 30 s by default) loses it:
            // the spans that find the queue full meanwhile are counted sooner.
            otel.traces.batchSpanProcessor.exportTimeout = .seconds(5)
            otel.traces.otlpExporter.timeout = .seconds(5)
            let lost = Counter(label: "pushmedia_trace_spans_dropped_total", factory: factory)
            otel.diagnosticLogger = .custom(
                Logger(label: "pushmedia.otel") { label in LostSpans(forward: logger, lost: lost) })
            let (tracer, service) = try OTel.makeTracingBackend(configuration: otel)
            InstrumentationSystem.bootstrap(tracer)
            self.service = service
        }
    }

    /// The exporter's diagnostic log: its warnings and errors go on to the server's log, and the
    /// spans it reports lost are counted. swift-otel tells of them only here: spans dropped because
    /// the queue was full (`dropped_count`), and batches the collector did not take (`batch_size`).
    struct LostSpans: LogHandler {
        let forward: Logger
        let lost: Counter
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .warning

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).merging(metadata) { explicit, _ in explicit }
            if let dropped = fields["dropped_count"].flatMap({ Int("\($0)") }) {
                lost.increment(by: dropped)
            } else if "\(event.message)".hasPrefix("Failed to export batch"),
                let size = fields["batch_size"].flatMap({ Int("\($0)") })
            {
                lost.increment(by: size)
            }
            guard event.level >= .warning else { return }
            var shown = Logger.Metadata()
            for key in ["dropped_count", "batch_size", "queue_size"] {
                if let value = fields[key] { shown[key] = value }
            }
            if let error = event.error { shown["error"] = "\(error)" }
            forward.log(level: event.level, "traces: \(event.message)", metadata: shown)
        }
    }

    extension TracingConfig {
        /// What puts the current span's `trace_id` and `span_id` on a log line, when its trace is
        /// recorded (the ids of one that is not lead to no trace): nil with traces off.
        public var logFields: Logger.MetadataProvider? {
            guard exportURL != nil else { return nil }
            let fields = OTel.makeLoggingMetadataProvider()
            return Logger.MetadataProvider { PipelineTrace.recording ? fields.get() : [:] }
        }
    }
#else
    /// A build without the `OTLP` trait has no exporter: `--otel-endpoint` is refused at start.
    struct TracingBackend {
        let service: any Service

        init(config: TracingConfig, exportURL: String, factory: any MetricsFactory, logger: Logger) throws {
            throw ServerError.tracing(
                "--otel-endpoint: this build of pushmedia has no OTLP exporter (built without the OTLP trait)")
        }
    }

    extension TracingConfig {
        /// Nil: a build without the exporter writes no trace ids.
        public var logFields: Logger.MetadataProvider? { nil }
    }
#endif
