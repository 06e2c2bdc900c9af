import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaServer

/// The trace export's settings (`TracingConfig`): `serve`, and the fleet's `work` and `purge`.
struct TracingOptions: ParsableArguments, SettingFlags {
    @Option(name: .customLong("otel-endpoint"), help: .setting("otel-endpoint"))
    var otelEndpoint: String?
    @Option(name: .customLong("otel-traces-endpoint"), help: .setting("otel-traces-endpoint"))
    var otelTracesEndpoint: String?
    @Option(name: .customLong("otel-headers"), help: .setting("otel-headers"))
    var otelHeaders: String?
    @Option(name: .customLong("otel-service-name"), help: .setting("otel-service-name"))
    var otelServiceName: String?
    @Option(name: .customLong("otel-resource-attributes"), help: .setting("otel-resource-attributes"))
    var otelResourceAttributes: String?
    @Option(name: .customLong("otel-sampler"), help: .setting("otel-sampler"))
    var otelSampler: String?
    @Option(name: .customLong("otel-sampler-arg"), help: .setting("otel-sampler-arg"))
    var otelSamplerArg: String?
    @Option(name: .customLong("otel-max-queue"), help: .setting("otel-max-queue"))
    var otelMaxQueue: String?
    @Option(name: .customLong("otel-schedule-delay"), help: .setting("otel-schedule-delay"))
    var otelScheduleDelay: String?

    /// The tracer for a command other than `serve`, from these flags, the settings file and the
    /// environment.
    func commandTracing(configFile: String?) throws -> CommandTracing {
        let environment = ProcessInfo.processInfo.environment
        let flags = given.compactMap { name, text in text.map { (name, $0) } }
        do {
            return try CommandTracing(
                flags: flags, configFile: configFile ?? environment["PUSHMEDIA_CONFIG"], environment: environment,
                logger: Logger(label: "pushmedia"))
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
