/// Why the relay cannot start.
public enum RelaySetupError: Error, CustomStringConvertible {
    case incomplete(String)
    case unreadable(what: String, path: String, why: String)

    public var description: String {
        switch self {
        case let .incomplete(message): message
        case let .unreadable(what, path, why): "\(what) \(path): \(why)"
        }
    }
}
