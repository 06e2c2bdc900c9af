import Foundation
import PushMedia
import PushMediaTestSupport
import Testing

@testable import PushMediaServer

/// The settings tables (`PushMediaConfig.settings`, `ServerConfig.settings`) against the tables of
/// docs/settings.md and against the flags `pushmedia` declares.
@Suite("Settings tables")
struct SettingsTableTests {
    /// What the tests need of an entry of either table.
    struct Entry: Sendable, CustomStringConvertible {
        var name: String
        var environment: String
        var fallback: String?
        var kind: SettingKind
        var commands: Set<SettingCommand>
        var documentedDefault: String
        var help: String
        var reloads: Bool
        /// Whether the default applied as text leaves the configuration as it is by default.
        var defaultIsDefault: @Sendable () throws -> Bool
        /// Whether `text` is refused.
        var refuses: @Sendable (String) -> Bool

        var description: String { "--\(name)" }
    }

    static let entries: [Entry] = {
        func entry<Config: Configurable & Equatable>(
            _ setting: Setting<Config>, served: @escaping @Sendable (Config) -> Config
        ) -> Entry {
            Entry(
                name: setting.name, environment: setting.environment, fallback: setting.fallbackEnvironment,
                kind: setting.kind, commands: setting.commands, documentedDefault: setting.documentedDefault,
                help: setting.help, reloads: setting.reloads,
                defaultIsDefault: {
                    let text = setting.documentedDefault.replacingOccurrences(of: "`", with: "")
                    var config = Config()
                    try setting.apply(text, to: &config)
                    return served(config) == served(Config())
                },
                refuses: { text in
                    var config = Config()
                    do {
                        try setting.apply(text, to: &config)
                        return false
                    } catch { return true }
                })
        }
        return PushMediaConfig.settings.map { entry($0, served: ServerConfig.served) }
            + ServerConfig.settings.map { entry($0, served: { $0 }) }
    }()

    @Test func namesAndVariablesAreUnique() {
        #expect(Set(Self.entries.map(\.name)).count == Self.entries.count)
        #expect(Set(Self.entries.map(\.environment)).count == Self.entries.count)
        for entry in Self.entries {
            #expect(entry.environment.hasPrefix("PUSHMEDIA_"), "\(entry)")
            #expect((entry.kind == .environmentOnly) == entry.commands.isEmpty, "\(entry): a flag belongs to a command")
        }
    }

    /// A default written as a value (in backticks) is one the setting accepts and the value the
    /// configuration has when the setting is not given (`serve`'s defaults included); `off` too.
    @Test func documentedDefaultsAreTheDefaults() throws {
        for entry in Self.entries {
            let text = entry.documentedDefault
            let literal = text.hasPrefix("`") && text.hasSuffix("`") && text.filter({ $0 == "`" }).count == 2
            guard (literal && !text.contains("$")) || text == "off" else { continue }
            #expect(try entry.defaultIsDefault(), "\(entry): documented default \(text)")
        }
    }

    /// The server's pipeline has `serve`'s gate and background limit unless they are given.
    @Test func serveDefaultsUnlessGiven() throws {
        let store = TemporaryDirectory()
        let defaults = try ServerParts(config: testConfig(store: store)).pipeline.config
        // 2 per core, and room for every page of one carousel on a machine with few cores.
        #expect(defaults.maxJobs == max(ProcessInfo.processInfo.activeProcessorCount * 2, 10))
        #expect(defaults.maxJobs ?? 0 >= Templates.maximumPages)
        #expect(defaults.backgroundLimit == .seconds(60))
        var config = testConfig(store: store)
        config.maxJobs = 1
        config.backgroundLimit = .zero
        let given = try ServerParts(config: config).pipeline.config
        #expect(given.maxJobs == 1 && given.backgroundLimit == .zero)
    }

    // MARK: docs/settings.md

    /// A row of one of the settings tables of docs/settings.md (`| flag | environment | default | |`).
    struct Row {
        var section: String
        var flag: String
        var environment: String
        var documentedDefault: String
        var help: String
    }

    static func readmeRows() throws -> [Row] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/settings.md")
        let lines = try String(contentsOf: readme, encoding: .utf8).components(separatedBy: "\n")
        var rows: [Row] = []
        var section = ""
        var inTable = false
        for line in lines {
            if line.hasPrefix("#") { section = line.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces) }
            if line.hasPrefix("| flag | environment | default |") {
                inTable = true
                continue
            }
            guard inTable, line.hasPrefix("|") else {
                inTable = false
                continue
            }
            if line.hasPrefix("|---") { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            rows.append(
                Row(
                    section: section, flag: cells[0], environment: cells[1], documentedDefault: cells[2],
                    help: cells.dropFirst(3).dropLast().joined(separator: "|")))
        }
        return rows
    }

    /// Every entry has one row with its flag (and "(repeatable)" for a list), its variables and
    /// its default; `serve`'s own settings are under "Settings of `pushmedia serve`", a fleet's
    /// under "Settings of a fleet".
    @Test func everyEntryIsInTheReadme() throws {
        let rows = try Self.readmeRows()
        #expect(rows.count > 40)
        for entry in Self.entries {
            let matching = rows.filter { $0.environment.contains("`\(entry.environment)`") }
            try #require(
                matching.count == 1, "\(entry): \(matching.count) docs/settings.md rows name \(entry.environment)")
            let row = matching[0]
            switch entry.kind {
            case .environmentOnly:
                #expect(row.flag.isEmpty, "\(entry)")
                if let fallback = entry.fallback { #expect(row.environment.contains("`\(fallback)`"), "\(entry)") }
            case .list:
                #expect(row.flag == "`--\(entry.name)` (repeatable)", "\(entry)")
                #expect(row.environment == "`\(entry.environment)` (comma-separated)", "\(entry)")
            case .option, .flag:
                #expect(row.flag == "`--\(entry.name)`", "\(entry)")
                let fallback = entry.fallback.map { " (or `\($0)`)" } ?? ""
                #expect(row.environment == "`\(entry.environment)`\(fallback)", "\(entry)")
            }
            #expect(row.documentedDefault == entry.documentedDefault, "\(entry)")
            #expect(row.help.hasSuffix("; SIGHUP applies it") == entry.reloads, "\(entry): whether SIGHUP applies it")
            let fleet = entry.commands.contains(.fleetDB)
            let servesOnly = entry.commands.contains(.serve) && entry.commands != .every && !fleet
            #expect((row.section == "Settings of `pushmedia serve`") == servesOnly, "\(entry) is under \(row.section)")
            #expect((row.section == "Settings of a fleet") == fleet, "\(entry) is under \(row.section)")
        }
    }

    /// Every flag and variable a row of docs/settings.md names is a table entry's.
    @Test func everyReadmeRowIsInTheTable() throws {
        let flags = Set(Self.entries.filter { $0.kind != .environmentOnly }.map { "--" + $0.name })
        let variables = Set(Self.entries.flatMap { [$0.environment] + ($0.fallback.map { [$0] } ?? []) })
        for row in try Self.readmeRows() {
            let named = Self.codeSpans(row.flag)
            #expect(named.allSatisfy(flags.contains), "\(row.flag)")
            let names = Self.codeSpans(row.environment)
            #expect(!names.isEmpty && names.allSatisfy(variables.contains), "\(row.environment)")
        }
    }

    /// The texts between backticks.
    static func codeSpans(_ text: String) -> [String] {
        let pieces = text.split(separator: "`", omittingEmptySubsequences: false)
        return pieces.indices.filter { $0 % 2 == 1 }.map { String(pieces[$0]) }
    }

    // MARK: command line

    /// `pushmedia`'s own options that are not settings.
    static let commandOptions: Set<String> = [
        "help", "version", "report", "pretty", "refresh", "out", "concurrency", "prefetch", "verify", "dry-run", "json",
        "fleet", "status", "wait", "delete",
    ]

    /// Every command declares exactly the entries scoped to it, each as its kind of flag, with
    /// the table's help.
    @Test func commandsDeclareTheirSettings() async throws {
        let run = try await Self.pushmedia(["--experimental-dump-help"])
        #expect(run.status == 0, "\(run.stderr)")
        let tool = try #require(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        let subcommands = try #require((tool["command"] as? [String: Any])?["subcommands"] as? [[String: Any]])
        let names = Set(subcommands.compactMap { $0["commandName"] as? String })
        #expect(names.isSuperset(of: SettingCommand.allCases.map(\.rawValue)))
        for subcommand in subcommands {
            guard let name = subcommand["commandName"] as? String, let command = SettingCommand(rawValue: name) else {
                continue
            }
            var declared: [String: [String: Any]] = [:]
            for argument in subcommand["arguments"] as? [[String: Any]] ?? [] {
                let names = argument["names"] as? [[String: Any]] ?? []
                for long in names where long["kind"] as? String == "long" {
                    guard let flag = long["name"] as? String, !Self.commandOptions.contains(flag) else { continue }
                    declared[flag] = argument
                }
            }
            let scoped = Self.entries.filter { $0.commands.contains(command) }
            #expect(Set(declared.keys) == Set(scoped.map(\.name)), "pushmedia \(name)")
            for entry in scoped {
                guard let argument = declared[entry.name] else { continue }
                #expect(argument["abstract"] as? String == entry.help, "pushmedia \(name) \(entry)")
                #expect((argument["kind"] as? String == "flag") == (entry.kind == .flag), "pushmedia \(name) \(entry)")
                let repeating = argument["isRepeating"] as? Bool == true
                #expect(repeating == (entry.kind == .list), "pushmedia \(name) \(entry)")
            }
        }
    }

    /// Each flag taking a value reaches its table entry: a value the entry refuses is refused
    /// with its message (exit 64). Shared flags are tried on `process`, the others on a command
    /// that takes them.
    @Test func flagsReachTheirEntries() async throws {
        let store = TemporaryDirectory()
        // About a hundred runs of the program: as many at once as the runner has threads.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for entry in Self.entries where entry.kind == .option || entry.kind == .list {
                guard let invalid = ["x", ""].first(where: entry.refuses) else { continue }
                let command =
                    entry.commands == .every ? .process : entry.commands.sorted { $0.rawValue < $1.rawValue }[0]
                let options =
                    [command.rawValue] + (command == .fleetDB ? [] : ["--store", store.path])
                    + ["--\(entry.name)", invalid]
                let arguments =
                    command == .purge ? ["https://example.com/a.jpg"] : command == .fleetDB ? ["check"] : []
                group.addTask {
                    let run = try await Self.pushmedia(options, arguments: arguments)
                    let described = "pushmedia \(command.rawValue) --\(entry.name) \(invalid): \(run.stderr)"
                    #expect(run.status == 64, "\(described)")
                    #expect(run.stderr.contains("for --\(entry.name):"), "\(described)")
                }
            }
            try await group.waitForAll()
        }
    }

    /// `pushmedia check-config`: 0 for a valid file, 65 with the setting's own message otherwise.
    @Test func checkConfig() async throws {
        let directory = TemporaryDirectory()
        let good = directory.file("good.yaml")
        let bad = directory.file("bad.yaml")
        try "budget: 3s\ntoken: [a-token-0123456789]\nport: 8081\n".write(
            toFile: good, atomically: true, encoding: .utf8)
        try "budget: 3s\nport: 99999\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let valid = try await Self.pushmedia(["check-config", good])
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(String(decoding: valid.stdout, as: UTF8.self).contains("3 settings, valid"))
        let invalid = try await Self.pushmedia(["check-config", bad])
        #expect(invalid.status == 65)
        #expect(invalid.stderr.contains("bad.yaml: invalid value \"99999\" for --port"), "\(invalid.stderr)")
        let missing = try await Self.pushmedia(["check-config", directory.file("none.yaml")])
        #expect(missing.status == 65)
    }

    /// `check-config` names every problem of a file in one run, with the nearest setting for a
    /// name that is none, and reads the environment as `serve` does.
    @Test func checkConfigNamesEveryProblem() async throws {
        let directory = TemporaryDirectory()
        let three = directory.file("three.yaml")
        try "budjet: 3s\nport: 99999\nmax-jobs: lots\n".write(toFile: three, atomically: true, encoding: .utf8)
        let run = try await Self.pushmedia(["check-config", three])
        #expect(run.status == 65)
        let lines = run.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(run.stderr)")
        #expect(run.stderr.contains("unknown setting --budjet (did you mean --budget?)"), "\(run.stderr)")
        #expect(run.stderr.contains("invalid value \"99999\" for --port"), "\(run.stderr)")
        #expect(run.stderr.contains("invalid value \"lots\" for --max-jobs"), "\(run.stderr)")
        // A public address needs auth: the token the environment gives (a Kubernetes Secret's) counts.
        let open = directory.file("open.yaml")
        try "host: 0.0.0.0\n".write(toFile: open, atomically: true, encoding: .utf8)
        let alone = try await Self.pushmedia(["check-config", open])
        #expect(alone.status == 65, "\(alone.stderr)")
        let withToken = try await Self.pushmedia(
            ["check-config", open], environment: ["PUSHMEDIA_TOKENS": "a-token-0123456789"])
        #expect(withToken.status == 0, "\(withToken.stderr)")
    }

    /// `--log-level warning` leaves out the info lines, such as "listening".
    @Test func logLevel() async throws {
        let store = TemporaryDirectory()
        for (level, logsInfo) in [("info", true), ("warning", false)] {
            let (status, log) = try await Self.runner.run {
                let server = try ServeProcess(arguments: ["--store", store.path, "--log-level", level])
                let status = server.stop()
                return (status, server.finishedLog())
            }
            #expect(status == 0)
            #expect(log.contains("listening") == logsInfo, "--log-level \(level): \(log)")
        }
        var config = ServerConfig()
        #expect(config.logLevel == .info)
        try config.set("log-level", to: "DEBUG")
        #expect(config.logLevel == .debug)
        #expect { try config.set("log-level", to: "loud") } throws: { "\($0)".contains("--log-level") }
    }

    // MARK: running pushmedia

    struct Run {
        var status: Int32
        var stdout: Data
        var stderr: String
    }

    /// Waiting for a child process blocks, so it happens on a thread of its own.
    static let runner = BlockingExecutor(name: "test-settings-cli", maxThreads: 4)

    /// Runs `pushmedia` with `options` then `arguments`, without the environment's `PUSHMEDIA_*`.
    static func pushmedia(_ options: [String], arguments: [String] = [], environment: [String: String] = [:])
        async throws -> Run
    {
        try await runner.run {
            let (process, out, err) = try started(options + arguments, environment: environment)
            let stdout = out.fileHandleForReading.readDataToEndOfFile()
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return Run(status: process.terminationStatus, stdout: stdout, stderr: stderr)
        }
    }

    /// `pushmedia` with `arguments`, started without the environment's `PUSHMEDIA_*` and `AWS_*`,
    /// its standard output and error in pipes.
    static func started(_ arguments: [String], environment: [String: String] = [:]) throws -> (
        Process, out: Pipe, err: Pipe
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pushmediaExecutable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("PUSHMEDIA_") && !$0.key.hasPrefix("AWS_")
        }.merging(environment) { _, given in given }
        let (out, err) = (Pipe(), Pipe())
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return (process, out, err)
    }
}
