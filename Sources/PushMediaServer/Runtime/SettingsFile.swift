import Foundation
import PushMedia
import Yams

/// A settings file (`--config FILE`, `PUSHMEDIA_CONFIG`): every setting of the settings tables
/// (`PushMediaConfig.settings`, `ServerConfig.settings`) by its flag's name, in YAML (a JSON
/// object is YAML too):
///
///     store: /var/lib/pushmedia/store
///     budget: 3s
///     allow-private-networks: false
///     token: [first-token, second-token]
///
/// A value is text, a number or true/false; a repeatable setting takes a list. It is read under
/// the environment and the flags, which win (`Configurable.fromSources`).
public enum SettingsFile {
    /// The (name, text) pairs of the file at `path`, a repeatable setting's list as one pair per
    /// item, each name checked against the tables.
    public static func read(_ path: String) throws(ConfigError) -> (path: String, entries: [(String, String)]) {
        let (entries, problems) = try readAll(path)
        if problems.count == 1 { throw problems[0] }
        if !problems.isEmpty { throw .several(problems) }
        return (path, entries)
    }

    /// The pairs of the file at `path` that are sound, and the problems of the others (names that
    /// are no setting's, lists where one value goes): `check-config` tells every problem at once.
    /// Throws when the file cannot be read or is no mapping.
    public static func readAll(_ path: String) throws(ConfigError) -> (
        entries: [(String, String)], problems: [ConfigError]
    ) {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .invalidValue(name: "config", value: path, expected: "a readable YAML file")
        }
        return try parseAll(text, path: path)
    }

    /// The (name, text) pairs of a settings file's `text`, named in errors by `path`.
    public static func parse(_ text: String, path: String) throws(ConfigError) -> [(String, String)] {
        let (entries, problems) = try parseAll(text, path: path)
        if problems.count == 1 { throw problems[0] }
        if !problems.isEmpty { throw .several(problems) }
        return entries
    }

    /// The sound pairs of `text`, and every problem of the others.
    static func parseAll(_ text: String, path: String) throws(ConfigError) -> (
        entries: [(String, String)], problems: [ConfigError]
    ) {
        let document: Any?
        do { document = try Yams.load(yaml: text) } catch {
            throw .file(path: path, reason: "not valid YAML: \(error)")
        }
        guard let document else { return ([], []) }
        guard let mapping = document as? [String: Any] else {
            throw .file(path: path, reason: "must be a mapping of settings by their flags' names, e.g. `budget: 3s`")
        }
        var entries: [(String, String)] = []
        // Every problem of the file is found before any is told.
        var problems: [ConfigError] = []
        for (name, value) in mapping.sorted(by: { $0.key < $1.key }) {
            guard name != "config" else {
                problems.append(.file(path: path, reason: "a settings file cannot name another one (config)"))
                continue
            }
            guard let kind = kind(of: name) else {
                problems.append(.inFile(path: path, .unknownSetting(name, nearest: nearestName(to: name))))
                continue
            }
            do throws(ConfigError) {
                if let list = value as? [Any] {
                    guard kind == .list else {
                        throw .inFile(
                            path: path,
                            .invalidValue(name: name, value: "a list", expected: "one value (it is not repeatable)"))
                    }
                    for item in list { entries.append((name, try scalar(item, name: name, path: path))) }
                } else {
                    entries.append((name, try scalar(value, name: name, path: path)))
                }
            } catch {
                problems.append(error)
            }
        }
        return (entries, problems)
    }

    /// The setting name of either table nearest to a name that is none.
    static func nearestName(to name: String) -> String? {
        ConfigError.nearest(
            to: name, among: PushMediaConfig.settings.map(\.name) + ServerConfig.settings.map(\.name))
    }

    /// The kind of the setting `name` in either table.
    static func kind(of name: String) -> SettingKind? {
        PushMediaConfig.setting(named: name)?.kind ?? ServerConfig.setting(named: name)?.kind
    }

    private static func scalar(_ value: Any, name: String, path: String) throws(ConfigError) -> String {
        switch value {
        case let text as String: return text
        case let flag as Bool: return flag ? "true" : "false"
        case let number as Int: return String(number)
        case let number as Double:
            return number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        default:
            throw .inFile(
                path: path,
                .invalidValue(name: name, value: "\(type(of: value))", expected: "text, a number or true/false"))
        }
    }
}
