import Foundation

/// A command of `pushmedia` that can take a setting's flag.
public enum SettingCommand: String, Sendable, CaseIterable {
    case process, batch, serve, gc, purge, work
    case fleetDB = "fleet-db"
}

extension Set where Element == SettingCommand {
    /// Every command that runs the pipeline (all but `fleet-db`): a shared flag.
    public static var every: Self { Set(SettingCommand.allCases).subtracting([.fleetDB]) }
}

/// How a setting is given on the command line.
public enum SettingKind: Sendable {
    /// `--name VALUE`.
    case option
    /// `--name VALUE`, repeatable; the environment variable is comma-separated.
    case list
    /// `--name` alone turns it on; the environment variable is true or false.
    case flag
    /// No flag: the environment only (credentials).
    case environmentOnly
}

/// One setting: its flag, environment variable, default and help, and how its text is read
/// into a `Config`. A configuration's table of these (`PushMediaConfig.settings`, the server's
/// `ServerConfig.settings`) is the one place a setting is declared: it drives the environment,
/// the command line's flags and `--help`, and the check of the README's settings tables.
public struct Setting<Config>: Sendable {
    public typealias Kind = SettingKind

    /// The flag's name without dashes, e.g. `budget`; errors name the setting `--<name>`.
    public let name: String
    /// The `PUSHMEDIA_*` variable.
    public let environment: String
    /// Read when `environment` is absent, e.g. `AWS_ACCESS_KEY_ID`.
    public let fallbackEnvironment: String?
    public let kind: Kind
    /// The commands whose command line takes the flag. The environment variable is read by all.
    public let commands: Set<SettingCommand>
    /// The default as the README's settings tables write it (Markdown: values in backticks).
    public let documentedDefault: String
    /// What the setting does, for `--help` (`help` adds the variable and the default).
    public let summary: String
    /// Validates the text and applies it, throwing `ConfigError.invalidValue` naming the setting.
    let read: @Sendable (inout Config, SettingText) throws(ConfigError) -> Void
    /// Whether `serve` applies a new value on SIGHUP (`reloadedOnSIGHUP()`); the others need a restart.
    public private(set) var reloads = false

    /// A setting read by `read`.
    public init(
        _ name: String, _ environment: String, fallback: String? = nil, _ kind: Kind = .option,
        commands: Set<SettingCommand> = .every, default documentedDefault: String, help summary: String,
        read: @escaping @Sendable (inout Config, SettingText) throws(ConfigError) -> Void
    ) {
        self.name = name
        self.environment = environment
        self.fallbackEnvironment = fallback
        self.kind = kind
        self.commands = commands
        self.documentedDefault = documentedDefault
        self.summary = summary
        self.read = read
    }

    /// This setting, applied by `serve` on SIGHUP without a restart.
    public func reloadedOnSIGHUP() -> Setting {
        var setting = self
        setting.reloads = true
        return setting
    }

    /// This setting of a part of a larger configuration (`ServerConfig.relays` of `serve`'s),
    /// read into that part: the part's table declares it once, the whole's lists it.
    public func lifted<Whole>(to part: WritableKeyPath<Whole, Config> & Sendable) -> Setting<Whole> {
        var lifted = Setting<Whole>(
            name, environment, fallback: fallbackEnvironment, kind, commands: commands, default: documentedDefault,
            help: summary
        ) { whole, text throws(ConfigError) in try read(&whole[keyPath: part], text) }
        lifted.reloads = reloads
        return lifted
    }

    /// `--name`, or nil for an environment-only setting.
    public var flag: String? { kind == .environmentOnly ? nil : "--" + name }

    /// The `--help` text: the summary, the variable and the default (unless none or off).
    public var help: String {
        let shown = documentedDefault.replacingOccurrences(of: "`", with: "")
        let variable = environment + (kind == .list ? ", comma-separated" : "")
        let noDefault = shown == "off" || shown.hasPrefix("none")
        let defaulted = noDefault ? "" : "; default \(shown)"
        return "\(summary) (env \(variable)\(defaulted)\(reloads ? "; SIGHUP applies it" : ""))."
    }

    /// Applies `text` to `config`.
    public func apply(_ text: String, to config: inout Config) throws(ConfigError) {
        try read(&config, SettingText(name: name, text: text))
    }
}

extension Setting {
    /// An integer in `range` (underscores allowed: `50_000_000`), for a setting with a default
    /// or one that is nil until given.
    public static func integer<Value: SettingInteger>(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Value> & Sendable,
        in range: ClosedRange<Int64>, commands: Set<SettingCommand> = .every, default documentedDefault: String,
        help summary: String
    ) -> Setting {
        Setting(name, environment, commands: commands, default: documentedDefault, help: summary) {
            config, value throws(ConfigError) in
            config[keyPath: keyPath] = Value(settingValue: try value.integer(in: range))
        }
    }

    /// A listener's address (`serve`'s).
    public static func address(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, String> & Sendable,
        default documentedDefault: String = "`127.0.0.1`", example: String = "0.0.0.0", help: String
    ) -> Setting {
        Setting(name, environment, commands: [.serve], default: documentedDefault, help: help) {
            config, value throws(ConfigError) in
            guard !value.text.isEmpty else {
                throw value.invalid(expected: "an address such as 127.0.0.1 or \(example)")
            }
            config[keyPath: keyPath] = value.text
        }
    }

    /// A setting of `serve`'s naming a readable file (`expected` says what it holds).
    public static func readableFile(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, String?> & Sendable,
        _ expected: String, help: () -> String
    ) -> Setting {
        Setting(name, environment, commands: [.serve], default: "none", help: help()) {
            config, value throws(ConfigError) in
            guard FileManager.default.isReadableFile(atPath: value.text) else {
                throw value.invalid(expected: "a readable file: \(expected)")
            }
            config[keyPath: keyPath] = value.text
        }
    }

    /// A duration such as `10`, `2.5s` or `800ms` (see `SettingText.duration()`).
    public static func duration(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Duration> & Sendable,
        commands: Set<SettingCommand> = .every, default documentedDefault: String, help summary: String
    ) -> Setting {
        Setting(name, environment, commands: commands, default: documentedDefault, help: summary) {
            config, value throws(ConfigError) in
            config[keyPath: keyPath] = try value.duration()
        }
    }

    /// An age such as `30s`, `10m`, `12h` or `7d`, of at least a second (or a minute: `atLeastAMinute`).
    public static func age(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Duration> & Sendable,
        atLeastAMinute: Bool = false, commands: Set<SettingCommand> = .every, default documentedDefault: String,
        help summary: String
    ) -> Setting {
        Setting(name, environment, commands: commands, default: documentedDefault, help: summary) {
            config, value throws(ConfigError) in
            config[keyPath: keyPath] = try atLeastAMinute ? value.ageOfMinutes() : value.ageOfSeconds()
        }
    }

    /// A flag that turns something on (`off` by default); its variable is true or false.
    public static func flag(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Bool> & Sendable,
        commands: Set<SettingCommand> = .every, help summary: String
    ) -> Setting {
        Setting(name, environment, .flag, commands: commands, default: "off", help: summary) {
            config, value throws(ConfigError) in
            config[keyPath: keyPath] = try value.bool()
        }
    }
}

extension Setting where Config: Configurable {
    /// An integer in `range`, documented with the default configuration's value (`Config()`).
    public static func integer<Value: FixedWidthInteger & SettingInteger>(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Value> & Sendable,
        in range: ClosedRange<Int64>, commands: Set<SettingCommand> = .every, help summary: String
    ) -> Setting {
        integer(
            name, environment, keyPath, in: range, commands: commands, default: "`\(Config()[keyPath: keyPath])`",
            help: summary)
    }

    /// A duration, documented with the default configuration's value in its largest whole unit
    /// (`10s`, `10m`, `1h`, `800ms`).
    public static func duration(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Duration> & Sendable,
        commands: Set<SettingCommand> = .every, help summary: String
    ) -> Setting {
        let written = SettingText.written(Config()[keyPath: keyPath], units: [("h", 3_600), ("m", 60), ("s", 1)])
        return duration(name, environment, keyPath, commands: commands, default: "`\(written)`", help: summary)
    }

    /// An age, documented with the default configuration's value in its largest whole unit
    /// (`30s`, `1m`, `12h`, `7d`).
    public static func age(
        _ name: String, _ environment: String, _ keyPath: WritableKeyPath<Config, Duration> & Sendable,
        atLeastAMinute: Bool = false, commands: Set<SettingCommand> = .every, help summary: String
    ) -> Setting {
        let written = SettingText.written(
            Config()[keyPath: keyPath], units: [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)])
        return age(
            name, environment, keyPath, atLeastAMinute: atLeastAMinute, commands: commands, default: "`\(written)`",
            help: summary)
    }
}

/// The text of one setting, with the readers the tables use; each throws
/// `ConfigError.invalidValue` naming the setting and what was expected.
public struct SettingText: Sendable {
    /// The setting's name (its flag without dashes).
    public let name: String
    /// The text given.
    public let text: String

    /// The error for this text: `expected` says what would have been accepted; `shown`
    /// replaces the text in the message (for secrets).
    public func invalid(expected: String, shown: String? = nil) -> ConfigError {
        .invalidValue(name: name, value: shown ?? text, expected: expected)
    }

    /// An integer in `range`; underscores are ignored.
    public func integer(in range: ClosedRange<Int64>) throws(ConfigError) -> Int64 {
        guard let value = Int64(text.replacingOccurrences(of: "_", with: "")), range.contains(value) else {
            throw invalid(expected: "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`, empty.
    public func bool() throws(ConfigError) -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default: throw invalid(expected: "true or false")
        }
    }

    /// A duration up to a day (see `PushMediaConfig.parseDuration`).
    public func duration() throws(ConfigError) -> Duration {
        guard let value = PushMediaConfig.parseDuration(text) else {
            throw invalid(expected: "a duration such as 10, 2.5s or 800ms")
        }
        return value
    }

    /// An age of at least a second (see `PushMediaConfig.parseAge`).
    public func ageOfSeconds() throws(ConfigError) -> Duration {
        guard let value = PushMediaConfig.parseAge(text), value >= .seconds(1) else {
            throw invalid(expected: "a duration of at least a second such as 30s, 10m, 12h or 7d")
        }
        return value
    }

    /// An age of at least a minute (see `PushMediaConfig.parseAge`).
    public func ageOfMinutes() throws(ConfigError) -> Duration {
        guard let value = PushMediaConfig.parseAge(text), value >= .seconds(60) else {
            throw invalid(expected: "a duration of at least a minute such as 90m, 12h, 30d or 2w")
        }
        return value
    }

    /// `duration` as a setting writes it: in the largest of `units` (name, seconds) that divides
    /// it whole, else in milliseconds.
    static func written(_ duration: Duration, units: [(String, Int64)]) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        for (unit, seconds) in units where milliseconds > 0 && milliseconds % (seconds * 1000) == 0 {
            return "\(milliseconds / (seconds * 1000))\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// The comma-separated items, trimmed, empty ones left out.
    public var items: [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// A configuration read from a table of settings: defaults, then the environment, then flags.
public protocol Configurable: Sendable {
    /// The defaults.
    init()
    /// Every setting, in the order `--help` lists them.
    static var settings: [Setting<Self>] { get }
}

extension Configurable {
    /// The table's entry for `name` (a flag name without dashes).
    public static func setting(named name: String) -> Setting<Self>? {
        settings.first { $0.name == name }
    }

    /// Applies one setting given as text (from a flag or an environment variable).
    /// - Parameter name: the flag name without dashes, e.g. `budget`.
    public mutating func set(_ name: String, to text: String) throws(ConfigError) {
        guard let setting = Self.setting(named: name) else { throw ConfigError.unknownSetting(name) }
        try setting.apply(text, to: &self)
    }

    /// Applies settings given as (flag name, text) pairs in order, skipping nil values; repeat a
    /// name for list settings such as `media-key` or `token`.
    public mutating func apply(_ settings: [(String, String?)]) throws(ConfigError) {
        for case let (name, text?) in settings { try set(name, to: text) }
    }

    /// The defaults, then the settings of `file` (a settings file's (name, text) pairs, named in
    /// errors by `path`) that are this table's, then the environment: flags, applied after, win.
    /// Names of another table in the file are left to it.
    public static func fromSources(
        file: (path: String, entries: [(String, String)])?, environment: [String: String]
    ) throws(ConfigError) -> Self {
        var config = Self()
        if let file {
            for (name, text) in file.entries {
                guard let setting = setting(named: name) else { continue }
                do { try setting.apply(text, to: &config) } catch { throw .inFile(path: file.path, error) }
            }
        }
        return try fromEnvironment(environment, over: config)
    }

    /// Reads every variable of the table present in `environment` on top of `base` (the
    /// defaults), in the order of the settings' names; a setting's fallback variable is read when
    /// its own is absent.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment, over base: Self = Self()
    ) throws(ConfigError) -> Self {
        var config = base
        for setting in settings.sorted(by: { $0.name < $1.name }) {
            let variable = environment[setting.environment] != nil ? setting.environment : setting.fallbackEnvironment
            guard let variable, let text = environment[variable] else { continue }
            do { try setting.apply(text, to: &config) } catch {
                throw ConfigError.inEnvironment(variable: variable, error)
            }
        }
        return config
    }
}

/// What an integer setting stores: a fixed-width integer, or one that is nil until given.
public protocol SettingInteger: SendableMetatype {
    /// `value`, already checked to be in the setting's range.
    init(settingValue value: Int64)
}

extension Int: SettingInteger { public init(settingValue value: Int64) { self.init(value) } }
extension Int64: SettingInteger { public init(settingValue value: Int64) { self = value } }
extension Int32: SettingInteger { public init(settingValue value: Int64) { self.init(value) } }
extension UInt32: SettingInteger { public init(settingValue value: Int64) { self.init(value) } }

extension Optional: SettingInteger where Wrapped: SettingInteger {
    public init(settingValue value: Int64) { self = Wrapped(settingValue: value) }
}
