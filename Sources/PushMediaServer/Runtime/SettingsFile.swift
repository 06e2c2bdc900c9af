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
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .invalidValue(name: "config", value: path, expected: "a readable YAML file")
        }
        return (path, try parse(text, path: path))
    }

    /// The (name, text) pairs of a settings file's `text`, named in errors by `path`.
    public static func parse(_ text: String, path: String) throws(ConfigError) -> [(String, String)] {
        let document: Any?
        do { document = try Yams.load(yaml: text) } catch {
            throw .file(path: path, reason: "not valid YAML: \(error)")
        }
        guard let document else { return [] }
        guard let mapping = document as? [String: Any] else {
            throw .file(path: path, reason: "must be a mapping of settings by their flags' names, e.g. `budget: 3s`")
        }
        var entries: [(String, String)] = []
        for (name, value) in mapping.sorted(by: { $0.key < $1.key }) {
            guard name != "config" else {
                throw .file(path: path, reason: "a settings file cannot name another one (config)")
            }
            guard let kind = kind(of: name) else {
                throw .inFile(path: path, .unknownSetting(name))
            }
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
        }
        return entries
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
