import ArgumentParser
import PushMedia
import PushMediaServer

extension ArgumentHelp {
    /// The help of the setting `name` (a flag name without dashes), from `PushMediaConfig.settings`
    /// or `ServerConfig.settings`: each flag of a setting is declared with this, so that its
    /// variable, default and text are written once, in the table.
    static func setting(_ name: String) -> ArgumentHelp {
        guard let help = PushMediaConfig.setting(named: name)?.help ?? ServerConfig.setting(named: name)?.help else {
            preconditionFailure("--\(name) is not in a settings table")
        }
        return ArgumentHelp(help)
    }
}

/// Options whose properties are settings' flags: each `@Option` or `@Flag` property is named as
/// its setting in camel case (`maxJobs` is `--max-jobs`, a list `urlKey` is `--url-key`), so the
/// flags given are read from the properties themselves. Declaring the property with
/// `help: .setting(name)` is all a setting's flag takes. Properties whose names are no setting's
/// (e.g. `--concurrency`) are left out; a conforming type has no property named as a setting
/// that is not that setting's flag (`url`'s `--profile`, the URL's option, is why it does not conform).
protocol SettingFlags {
    /// Properties named otherwise than their setting (property name: setting name).
    static var settingNames: [String: String] { get }
}

extension SettingFlags {
    static var settingNames: [String: String] { [:] }

    /// The setting flags given, as (setting name, text) pairs in declaration order; a list's
    /// every value; a flag that is set gives `true`.
    var given: [(String, String?)] {
        Mirror(reflecting: self).children.flatMap { child -> [(String, String?)] in
            guard let label = child.label, label.hasPrefix("_"), let flag = child.value as? any GivenTexts else {
                return []
            }
            let property = String(label.dropFirst())
            let name = Self.settingNames[property] ?? settingName(property)
            guard PushMediaConfig.setting(named: name) != nil || ServerConfig.setting(named: name) != nil else {
                return []
            }
            return flag.texts.map { (name, $0) }
        }
    }
}

/// `maxJobs` → `max-jobs`, `apnsTLSCert` → `apns-tls-cert`, `s3Endpoint` → `s3-endpoint`.
func settingName(_ property: String) -> String {
    let characters = Array(property)
    var name = ""
    for (i, c) in characters.enumerated() {
        if c.isUppercase, i > 0 {
            let previous = characters[i - 1]
            let beforeLower = i + 1 < characters.count && characters[i + 1].isLowercase
            if previous.isLowercase || previous.isNumber || (previous.isUppercase && beforeLower) { name += "-" }
        }
        name += c.lowercased()
    }
    return name
}

/// What a parsed `@Option` or `@Flag` gives as a setting's texts.
protocol GivenTexts {
    var texts: [String] { get }
}

extension Option: GivenTexts {
    var texts: [String] {
        let value: Any = wrappedValue
        if let text = value as? String { return [text] }
        if let texts = value as? [String] { return texts }
        return []
    }
}

extension Flag: GivenTexts {
    var texts: [String] { (wrappedValue as Any) as? Bool == true ? ["true"] : [] }
}
