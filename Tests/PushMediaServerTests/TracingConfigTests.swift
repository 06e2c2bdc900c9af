import Foundation
import PushMedia
import Testing

@testable import PushMediaServer

/// `--otel-*`: where spans go, the OpenTelemetry variables as fallbacks, and the rules that stop
/// a start (the exporter itself is checked end to end by scripts/tracing.sh).
@Suite struct TracingConfigTests {
    static func config(_ environment: [String: String]) throws -> ServerConfig {
        try ServerConfig.fromSources(file: nil, environment: environment)
    }

    @Test func offWithoutAnEndpoint() throws {
        #expect(try Self.config([:]).tracing.exportURL == nil)
        #expect(try Self.config([:]).tracing.logIDs == nil)
    }

    @Test func theBaseEndpointGetsTheTracesPathAndTheFullOneIsKept() throws {
        #expect(
            try Self.config(["PUSHMEDIA_OTEL_ENDPOINT": "http://collector:4318"]).tracing.exportURL
                == "http://collector:4318/v1/traces")
        #expect(
            try Self.config(["OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/otlp/"]).tracing.exportURL
                == "https://collector:4318/otlp/v1/traces")
        let both = try Self.config([
            "PUSHMEDIA_OTEL_ENDPOINT": "http://collector:4318",
            "PUSHMEDIA_OTEL_TRACES_ENDPOINT": "http://traces:9000/in",
        ])
        #expect(both.tracing.exportURL == "http://traces:9000/in")
    }

    @Test func theConventionsVariablesAreRead() throws {
        let tracing = try Self.config([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SERVICE_NAME": "push-eu",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=push%20ops",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%3D%3D", "OTEL_BSP_MAX_QUEUE_SIZE": "100",
            "OTEL_BSP_SCHEDULE_DELAY": "5000",
        ]).tracing
        #expect(tracing.serviceName == "push-eu")
        #expect(tracing.resourceAttributes == ["deployment.environment": "prod", "team": "push ops"])
        #expect(tracing.sampler == .parentBasedTraceIDRatio && tracing.samplerRatio == 0.01)
        #expect(tracing.headers == ["x-api-key": "abc=="])
        #expect(tracing.maxQueue == 100)
        #expect(tracing.scheduleDelayMilliseconds == 5000)
    }

    @Test func badValuesNameTheSettingAndHideAHeader() throws {
        for (variable, value, setting) in [
            ("PUSHMEDIA_OTEL_ENDPOINT", "collector:4318", "--otel-endpoint"),
            ("PUSHMEDIA_OTEL_ENDPOINT", "http://c:4318/?token=x", "--otel-endpoint"),
            ("PUSHMEDIA_OTEL_ENDPOINT", "http://user:pw@c:4318", "--otel-endpoint"),
            ("PUSHMEDIA_OTEL_SAMPLER", "sometimes", "--otel-sampler"),
            ("PUSHMEDIA_OTEL_SAMPLER_ARG", "1.5", "--otel-sampler-arg"),
            ("PUSHMEDIA_OTEL_MAX_QUEUE", "0", "--otel-max-queue"),
            ("PUSHMEDIA_OTEL_SCHEDULE_DELAY", "0", "--otel-schedule-delay"),
            ("OTEL_BSP_SCHEDULE_DELAY", "soon", "--otel-schedule-delay"),
        ] {
            let error = #expect(throws: ConfigError.self) { try Self.config([variable: value]) }
            #expect(error.map { "\($0)" }?.contains(setting) == true, "\(variable)=\(value)")
        }
        let error = #expect(throws: ConfigError.self) {
            try Self.config(["PUSHMEDIA_OTEL_HEADERS": "secret-api-key-without-a-name"])
        }
        #expect(error.map { "\($0)" }?.contains("secret-api-key") == false)
    }

    @Test func aVariableTheExporterReadsMustAgreeWithTheSetting() throws {
        let environment = [
            "PUSHMEDIA_OTEL_ENDPOINT": "http://mine:4318", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://theirs:4318",
        ]
        let server = try Self.config(environment)
        #expect(server.tracing.endpoint == "http://mine:4318")
        let error = #expect(throws: ServerError.self) {
            try StartChecks(config: PushMediaConfig(), server: server, environment: environment)
        }
        #expect(error.map { "\($0)" }?.contains("OTEL_EXPORTER_OTLP_ENDPOINT") == true)
        // The same value, or the variable alone, is no conflict.
        let same = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://theirs:4318"]
        _ = try StartChecks(config: PushMediaConfig(), server: try Self.config(same), environment: same)
        // A secret header that differs is named, its value not shown.
        let headers = ["PUSHMEDIA_OTEL_HEADERS": "k=mine", "OTEL_EXPORTER_OTLP_HEADERS": "k=their-secret"]
        let withEndpoint = headers.merging(["PUSHMEDIA_OTEL_ENDPOINT": "http://c:4318"]) { $1 }
        let headerError = #expect(throws: ServerError.self) {
            try StartChecks(config: PushMediaConfig(), server: try Self.config(withEndpoint), environment: withEndpoint)
        }
        #expect(headerError.map { "\($0)" }.map { $0.contains("(hidden)") && !$0.contains("their-secret") } == true)
    }
}
