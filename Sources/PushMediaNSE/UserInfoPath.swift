import Foundation

/// A place in `userInfo` written the way the server names a media reference in the descriptor's
/// items: keys joined by dots (quoted when they hold a dot, bracket or quote), `[n]` for an array
/// element, `(json)` for the document inside a JSON string. For example
/// `ct_ContentSlider.items[2].imageUrl`, `att.id1`, `"com.urbanairship.media_attachment".url[0]`.
enum UserInfoPath {
    enum Step: Equatable {
        case key(String)
        case index(Int)
        case embedded
    }

    /// The steps of `text`, or nil when it is not a path of this form. At most 32 steps and 512
    /// characters are read: a descriptor's paths are short, and a payload is untrusted.
    static func parse(_ text: String) -> [Step]? {
        guard !text.isEmpty, text.utf8.count <= 512 else { return nil }
        var steps: [Step] = []
        var rest = Substring(text)
        var needsKey = true
        while !rest.isEmpty {
            guard steps.count < 32 else { return nil }
            if rest.hasPrefix("[") {
                guard let close = rest.firstIndex(of: "]"),
                    let index = Int(rest[rest.index(after: rest.startIndex)..<close]),
                    index >= 0, !steps.isEmpty
                else { return nil }
                steps.append(.index(index))
                rest = rest[rest.index(after: close)...]
            } else if rest.hasPrefix("(json)") {
                guard !steps.isEmpty else { return nil }
                steps.append(.embedded)
                rest = rest.dropFirst("(json)".count)
            } else if rest.hasPrefix(".") {
                guard !steps.isEmpty, !needsKey else { return nil }
                rest = rest.dropFirst()
                needsKey = true
                continue
            } else if needsKey {
                guard let (key, after) = key(at: rest) else { return nil }
                steps.append(.key(key))
                rest = after
            } else {
                return nil
            }
            needsKey = false
        }
        return needsKey ? nil : steps
    }

    /// The value at `text` in `userInfo`, or nil when the path is malformed or leads nowhere.
    static func value(at text: String, in userInfo: [AnyHashable: Any]) -> Any? {
        guard let steps = parse(text) else { return nil }
        var current: Any = userInfo
        for step in steps {
            switch step {
            case let .key(key):
                guard let object = UserInfoValue.object(current), let next = object[key] else { return nil }
                current = next
            case let .index(index):
                guard let array = current as? [Any], array.indices.contains(index) else { return nil }
                current = array[index]
            case .embedded:
                guard let string = current as? String,
                    let document = try? JSONSerialization.jsonObject(
                        with: Data(string.utf8), options: [.fragmentsAllowed])
                else { return nil }
                current = document
            }
        }
        return current
    }

    /// A plain key (up to the next `.`, `[` or `(json)`; never holding `]` or `"`, which only a
    /// quoted key does) or a quoted one (`\"` inside), and the rest.
    private static func key(at text: Substring) -> (String, Substring)? {
        if text.hasPrefix("\"") {
            var key = ""
            var index = text.index(after: text.startIndex)
            while index < text.endIndex {
                let character = text[index]
                if character == "\\", text.index(after: index) < text.endIndex {
                    index = text.index(after: index)
                    key.append(text[index])
                } else if character == "\"" {
                    return (key, text[text.index(after: index)...])
                } else {
                    key.append(character)
                }
                index = text.index(after: index)
            }
            return nil
        }
        var end = text.startIndex
        while end < text.endIndex, !".[]\"".contains(text[end]), !text[end...].hasPrefix("(json)") {
            end = text.index(after: end)
        }
        guard end > text.startIndex else { return nil }
        return (String(text[..<end]), text[end...])
    }
}
