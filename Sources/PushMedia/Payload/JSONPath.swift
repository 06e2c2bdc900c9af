/// A location inside a JSON document: object keys and array indexes from the root.
public struct JSONPath: Sendable, Hashable, CustomStringConvertible {
    public enum Step: Sendable, Hashable {
        case key(String)
        case index(Int)
        /// The JSON document held in a string (CleverTap's `pt_json`): read by parsing the
        /// string, written by serializing the document back into it (compact, still a string).
        case embedded
    }

    public var steps: [Step]

    public init(_ steps: [Step]) { self.steps = steps }

    /// A path of object keys only, e.g. `JSONPath(keys: "ab", "att", "url")`.
    public init(keys: String...) { steps = keys.map(Step.key) }

    public func appending(_ step: Step) -> JSONPath { JSONPath(steps + [step]) }
    public func appending(key: String) -> JSONPath { appending(.key(key)) }
    public var parent: JSONPath { JSONPath(Array(steps.dropLast())) }

    /// Dotted form for reports: `message.android.notification.image`, `urls[1].url`; keys that
    /// contain a dot or bracket are quoted.
    public var description: String {
        var text = ""
        for step in steps {
            switch step {
            case let .key(key):
                let plain = !key.isEmpty && !key.contains(where: { ".[]\"".contains($0) })
                if !text.isEmpty { text += "." }
                text += plain ? key : "\"\(key.replacingOccurrences(of: "\"", with: "\\\""))\""
            case let .index(index):
                text += "[\(index)]"
            case .embedded:
                text += "(json)"
            }
        }
        return text
    }
}

extension JSONValue {
    /// The value at `path`, if every step exists.
    public subscript(path path: JSONPath) -> JSONValue? {
        var current = self
        for step in path.steps {
            switch (step, current) {
            case let (.key(key), .object(object)):
                guard let next = object[key] else { return nil }
                current = next
            case let (.index(index), .array(array)):
                guard array.indices.contains(index) else { return nil }
                current = array[index]
            case let (.embedded, .string(text)):
                guard let document = try? JSONValue.parse(Array(text.utf8)) else { return nil }
                current = document
            default:
                return nil
            }
        }
        return current
    }

    /// Sets the value at `path`, creating missing objects on the way (never arrays). Returns
    /// false, changing nothing, when a step meets a value of the wrong kind or an index that does
    /// not exist. Setting nil removes the member or array element.
    @discardableResult
    public mutating func set(_ value: JSONValue?, at path: JSONPath) -> Bool {
        set(value, steps: path.steps[...])
    }

    private mutating func set(_ value: JSONValue?, steps: ArraySlice<JSONPath.Step>) -> Bool {
        guard let step = steps.first else {
            guard let value else { return false }
            self = value
            return true
        }
        let rest = steps.dropFirst()
        switch (step, self) {
        case (.key(let key), .object(var object)):
            if rest.isEmpty {
                object[key] = value
            } else {
                var child = object[key] ?? .object(JSONObject())
                if object[key] == nil && value == nil { return true }
                guard child.set(value, steps: rest) else { return false }
                object[key] = child
            }
            self = .object(object)
            return true
        case (.index(let index), .array(var array)):
            guard array.indices.contains(index) else { return false }
            if rest.isEmpty {
                if let value { array[index] = value } else { array.remove(at: index) }
            } else {
                guard array[index].set(value, steps: rest) else { return false }
            }
            self = .array(array)
            return true
        case (.embedded, .string(let text)):
            // A path never ends inside a string: the document is changed and written back.
            guard !rest.isEmpty, var document = try? JSONValue.parse(Array(text.utf8)),
                document.set(value, steps: rest)
            else { return false }
            self = .string(String(decoding: document.serialized(), as: UTF8.self))
            return true
        default:
            return false
        }
    }
}

extension JSONObject {
    /// The value at `path` (its first step must be a key).
    public subscript(path path: JSONPath) -> JSONValue? {
        JSONValue.object(self)[path: path]
    }

    /// Whether `set(_:at:)` can write at `path`: every step that exists is a container of the
    /// right kind (missing object members would be created).
    public func canSet(at path: JSONPath) -> Bool {
        var current: JSONValue? = .object(self)
        for (index, step) in path.steps.enumerated() {
            switch (step, current) {
            case (.key(let key), .object(let members)?): current = members[key]
            case (.index(let index), .array(let items)?) where items.indices.contains(index): current = items[index]
            case (.embedded, .string?):
                guard let document = JSONValue.object(self)[path: JSONPath(Array(path.steps[...index]))] else {
                    return false
                }
                current = document
            case (.key, nil): current = nil
            default: return false
            }
        }
        return true
    }

    /// Sets the value at `path`, creating missing objects on the way; see `JSONValue.set(_:at:)`.
    @discardableResult
    public mutating func set(_ value: JSONValue?, at path: JSONPath) -> Bool {
        var root = JSONValue.object(self)
        guard root.set(value, at: path), case let .object(object) = root else { return false }
        self = object
        return true
    }
}
