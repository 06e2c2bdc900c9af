import Foundation
import PushMedia

/// OpenTelemetry traces (`--otel-*`): off unless an OTLP/HTTP endpoint is given. Each setting
/// also reads the variable the OpenTelemetry convention gives it (`OTEL_EXPORTER_OTLP_ENDPOINT`,
/// `OTEL_SERVICE_NAME`, …) when its `PUSHMEDIA_OTEL_*` one is absent.
public struct TracingConfig: Equatable, Sendable {
    /// `--otel-endpoint`: the collector's OTLP/HTTP base URL; traces go to `<url>/v1/traces`.
    public var endpoint: String?
    /// `--otel-traces-endpoint`: the full URL traces are posted to (wins over `endpoint`).
    public var tracesEndpoint: String?
    /// `--otel-headers`: headers sent with each export (`key=value,…`; an API key): never logged.
    public var headers: [String: String] = [:]
    /// `--otel-service-name`: `service.name` of every span: pushmedia.
    public var serviceName = "pushmedia"
    /// `--otel-resource-attributes`: more resource attributes (`key=value,…`).
    public var resourceAttributes: [String: String] = [:]
    /// `--otel-sampler`: parentbased_always_on (OpenTelemetry's default).
    public var sampler = TraceSampler.Rule.parentBasedAlwaysOn
    /// `--otel-sampler-arg`: the ratio of the `*traceidratio` samplers: 1.
    public var samplerRatio = 1.0
    /// `--otel-max-queue`: finished spans held for export; past it new ones are dropped (and
    /// counted, `pushmedia_trace_spans_dropped_total`): 2048.
    public var maxQueue = 2048
    /// `--otel-schedule-delay`: milliseconds the exporter waits before it sends spans that fill
    /// less than a batch (a full batch, 512, goes at once): 500.
    public var scheduleDelayMilliseconds = 500
    public init() {}

    /// Where spans are posted, or nil: tracing off.
    public var exportURL: String? {
        if let tracesEndpoint { return tracesEndpoint }
        guard let endpoint else { return nil }
        return endpoint + (endpoint.hasSuffix("/") ? "" : "/") + "v1/traces"
    }

    /// The variables OpenTelemetry's exporter reads itself, with the setting each must agree with.
    static let conventionVariables: [(variable: String, setting: String)] = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "otel-endpoint"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "otel-traces-endpoint"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "otel-headers"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "otel-headers"),
        ("OTEL_SERVICE_NAME", "otel-service-name"),
        ("OTEL_RESOURCE_ATTRIBUTES", "otel-resource-attributes"),
        ("OTEL_TRACES_SAMPLER", "otel-sampler"),
        ("OTEL_TRACES_SAMPLER_ARG", "otel-sampler-arg"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "otel-max-queue"),
        ("OTEL_BSP_SCHEDULE_DELAY", "otel-schedule-delay"),
    ]

    /// Refuses an `OTEL_*` variable whose value differs from the setting it stands for (a flag or
    /// `PUSHMEDIA_OTEL_*` said otherwise): the process and the tools that read OpenTelemetry's
    /// variables would disagree about where the traces go.
    func checkAgainst(environment: [String: String]) throws(ServerError) {
        guard exportURL != nil else { return }
        if tracesEndpoint != nil, environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil,
            environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == nil
        {
            throw .tracing(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set beside --otel-traces-endpoint: traces go to the setting's URL, "
                    + "not to the variable's /v1/traces; unset it, or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT instead")
        }
        for (variable, setting) in Self.conventionVariables {
            guard let text = environment[variable],
                let entry = Self.settings.first(where: { $0.name == setting })
            else { continue }
            // The variable read over these settings: it differs when it changes them.
            var read = ServerConfig()
            read.tracing = self
            do { try entry.apply(text, to: &read) } catch { throw .tracing("\(variable): \(error)") }
            let differs = read.tracing != self
            if differs {
                let shown = setting == "otel-headers" ? "(hidden)" : text
                throw .tracing(
                    "\(variable)=\(shown) differs from --\(setting): OpenTelemetry's tools read the variable; unset it or "
                        + "give the setting the same value")
            }
        }
    }

    /// `key=value` pairs separated by commas, values percent-decoded (the OTLP exporter's
    /// header and resource-attribute lists).
    static func pairs(_ value: SettingText, secret: Bool) throws(ConfigError) -> [String: String] {
        var pairs: [String: String] = [:]
        for item in value.text.split(separator: ",") where !item.trimmingCharacters(in: .whitespaces).isEmpty {
            guard let equals = item.firstIndex(of: "="),
                case let key = item[..<equals].trimmingCharacters(in: .whitespaces), !key.isEmpty,
                let decoded = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                    .removingPercentEncoding
            else {
                throw value.invalid(
                    expected: "key=value pairs separated by commas", shown: secret ? "(hidden)" : String(item))
            }
            pairs[key] = decoded
        }
        return pairs
    }

    /// An http(s) URL with a host, and no query, fragment or credentials.
    static func endpointURL(_ value: SettingText) throws(ConfigError) -> String {
        let expected = "an http(s) URL of an OTLP/HTTP collector, such as http://otel-collector:4318"
        guard let parts = URLComponents(string: value.text), let scheme = parts.scheme?.lowercased(),
            ["http", "https"].contains(scheme), let host = parts.host, !host.isEmpty, parts.query == nil,
            parts.fragment == nil, parts.user == nil, parts.password == nil
        else { throw value.invalid(expected: expected) }
        return value.text
    }

    /// The settings, lifted into `serve`'s.
    static let settings: [Setting<ServerConfig>] = [
        Setting(
            "otel-endpoint", "PUSHMEDIA_OTEL_ENDPOINT", fallback: "OTEL_EXPORTER_OTLP_ENDPOINT",
            commands: [.serve, .work, .purge],
            default: "none",
            help: "Send traces to this OpenTelemetry collector's OTLP/HTTP base URL (/v1/traces is added); none: off"
        ) {
            config, value throws(ConfigError) in
            config.tracing.endpoint = try endpointURL(value)
        },
        Setting(
            "otel-traces-endpoint", "PUSHMEDIA_OTEL_TRACES_ENDPOINT", fallback: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            commands: [.serve, .work, .purge], default: "none", help: "Send traces to this full OTLP/HTTP URL instead"
        ) {
            config, value throws(ConfigError) in
            config.tracing.tracesEndpoint = try endpointURL(value)
        },
        Setting(
            "otel-headers", "PUSHMEDIA_OTEL_HEADERS", fallback: "OTEL_EXPORTER_OTLP_HEADERS",
            commands: [.serve, .work, .purge],
            default: "none", help: "Headers sent with each export, key=value pairs separated by commas (an API key)"
        ) {
            config, value throws(ConfigError) in
            config.tracing.headers = try pairs(value, secret: true)
        },
        Setting(
            "otel-service-name", "PUSHMEDIA_OTEL_SERVICE_NAME", fallback: "OTEL_SERVICE_NAME",
            commands: [.serve, .work, .purge],
            default: "`pushmedia`", help: "service.name of the spans"
        ) {
            config, value throws(ConfigError) in
            guard !value.text.isEmpty else { throw value.invalid(expected: "a name") }
            config.tracing.serviceName = value.text
        },
        Setting(
            "otel-resource-attributes", "PUSHMEDIA_OTEL_RESOURCE_ATTRIBUTES", fallback: "OTEL_RESOURCE_ATTRIBUTES",
            commands: [.serve, .work, .purge], default: "none",
            help: "More attributes of the spans' resource, key=value pairs separated by commas"
        ) {
            config, value throws(ConfigError) in
            config.tracing.resourceAttributes = try pairs(value, secret: false)
        },
        Setting(
            "otel-sampler", "PUSHMEDIA_OTEL_SAMPLER", fallback: "OTEL_TRACES_SAMPLER",
            commands: [.serve, .work, .purge],
            default: "`parentbased_always_on`",
            help: "Which traces are recorded: " + TraceSampler.Rule.allCases.map(\.rawValue).joined(separator: ", ")
        ) {
            config, value throws(ConfigError) in
            guard let sampler = TraceSampler.Rule(rawValue: value.text.lowercased()) else {
                throw value.invalid(expected: TraceSampler.Rule.allCases.map(\.rawValue).joined(separator: ", "))
            }
            config.tracing.sampler = sampler
        },
        Setting(
            "otel-sampler-arg", "PUSHMEDIA_OTEL_SAMPLER_ARG", fallback: "OTEL_TRACES_SAMPLER_ARG",
            commands: [.serve, .work, .purge],
            default: "`1`", help: "The ratio of traces the *traceidratio samplers record, 0 to 1"
        ) {
            config, value throws(ConfigError) in
            guard let ratio = Double(value.text), ratio >= 0, ratio <= 1 else {
                throw value.invalid(expected: "a number from 0 to 1, such as 0.01")
            }
            config.tracing.samplerRatio = ratio
        },
        Setting(
            "otel-max-queue", "PUSHMEDIA_OTEL_MAX_QUEUE", fallback: "OTEL_BSP_MAX_QUEUE_SIZE",
            commands: [.serve, .work, .purge],
            default: "`2048`",
            help: "Finished spans held for export; past it new ones are dropped and counted "
                + "(pushmedia_trace_spans_dropped_total)"
        ) {
            config, value throws(ConfigError) in
            config.tracing.maxQueue = Int(try value.integer(in: 1...1_000_000))
        },
        Setting(
            "otel-schedule-delay", "PUSHMEDIA_OTEL_SCHEDULE_DELAY", fallback: "OTEL_BSP_SCHEDULE_DELAY",
            commands: [.serve, .work, .purge],
            default: "`500`",
            help: "Milliseconds the exporter waits before sending spans that fill less than a batch (512 go at once)"
        ) {
            config, value throws(ConfigError) in
            config.tracing.scheduleDelayMilliseconds = Int(try value.integer(in: 1...600_000))
        },
    ]
}
