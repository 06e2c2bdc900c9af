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
