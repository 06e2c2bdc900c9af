import CoreMetrics
import Logging
import PushMedia
import ServiceLifecycle

/// Traces for the fleet's commands other than `serve` (`work`, `purge`): the same `--otel-*`
/// settings, `PUSHMEDIA_OTEL_*` and `OTEL_*` variables and exporter as `serve`, and the spans a
/// command ended are sent before it exits.
public struct CommandTracing: Sendable {
    /// Which of the command's work begins a recorded trace; nil with traces off.
    public let sampler: TraceSampler?
    private let service: (any Service)?
    private let logger: Logger

    /// The tracing settings of the settings file at `configFile`, the environment and `flags`
    /// (setting name, text; flags win); when they name a collector, the process's tracer is set.
    public init(flags: [(String, String)], configFile: String?, environment: [String: String], logger: Logger)
        throws
    {
        let file = try configFile.map(SettingsFile.read)
        var server = ServerConfig()
        for setting in TracingConfig.settings {
            if let file {
                for (name, text) in file.entries where name == setting.name {
                    do { try setting.apply(text, to: &server) } catch {
                        throw ConfigError.inFile(path: file.path, error)
                    }
                }
            }
            let variable =
                environment[setting.environment] != nil ? setting.environment : setting.fallbackEnvironment
            if let variable, let text = environment[variable] {
                do { try setting.apply(text, to: &server) } catch {
                    throw ConfigError.inEnvironment(variable: variable, error)
                }
            }
            for (name, text) in flags where name == setting.name { try setting.apply(text, to: &server) }
        }
        try server.tracing.checkAgainst(environment: environment)
        self.logger = logger
        if let exportURL = server.tracing.exportURL {
            // Lost spans are counted where a server would show them; a command has no /metrics.
            let backend = try TracingBackend(
                config: server.tracing, exportURL: exportURL, factory: NOOPMetricsHandler.instance, logger: logger)
            (sampler, service) = (backend.sampler, backend.service)
        } else {
            (sampler, service) = (nil, nil)
        }
    }

    /// `body` with the exporter running beside it; the spans it ended are sent before this returns.
    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        guard let service else { return try await body() }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [service], logger: logger))
        let exporting = Task { try await group.run() }
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await exporting.value
        return try result.get()
    }
}
