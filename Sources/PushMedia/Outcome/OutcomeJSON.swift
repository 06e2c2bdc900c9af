// The outcome as JSON without Foundation's JSONEncoder: the HTTP hook encodes one per request,
// and the encoder's reflection-driven walk was the largest cost of a cache hit. The output is
// what `JSONEncoder` with `.sortedKeys` writes for the Codable conformances (same keys, same
// order, absent optionals omitted); a test compares the two.

extension Outcome {
    /// The outcome as a JSON object with sorted keys, as its `Codable` form: `primary`'s fields
    /// flattened beside the payload's own.
    public var jsonValue: JSONValue { .object(JSONObject(jsonMembers)) }

    /// `jsonValue` serialized, split where the number of `timings_ms.total` goes: `head`, the
    /// total, `tail` (an answer kept ready is sent again with a new total).
    public func serializedAroundTotal() -> (head: [UInt8], tail: [UInt8]) {
        var head: [UInt8] = [0x7B]
        var tail: [UInt8] = []
        var reachedTotal = false
        func write(_ bytes: [UInt8]) {
            if reachedTotal { tail += bytes } else { head += bytes }
        }
        for (index, (key, value)) in jsonMembers.enumerated() {
            if index > 0 { write([0x2C]) }
            write(JSONValue.string(key).serialized() + [0x3A])
            guard key == "timings_ms", case let .object(timings) = value else {
                write(value.serialized())
                continue
            }
            write([0x7B])
            for (position, member) in timings.members.enumerated() {
                if position > 0 { write([0x2C]) }
                write(JSONValue.string(member.key).serialized() + [0x3A])
                if member.key == "total" { reachedTotal = true } else { write(member.value.serialized()) }
            }
            write([0x7D])
        }
        tail.append(0x7D)
        return (head, tail)
    }

    private var jsonMembers: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        members.append(optional: "attachment", attachment?.jsonValue)
        members.append(optional: "cache_hit", cacheHit.map(JSONValue.bool))
        members.append(optional: "media", media.map { .array($0.map(\.jsonValue)) })
        members.append(optional: "media_key", mediaKey.map(JSONValue.string))
        members.append(optional: "message", message.map(JSONValue.string))
        members.append(("payload_bytes", .number(String(payloadBytes))))
        members.append(optional: "reason", reason.map(JSONValue.string))
        members.append(optional: "revalidated", revalidated.map(JSONValue.bool))
        members.append(optional: "source_bytes", sourceBytes.map { .number(String($0)) })
        members.append(optional: "source_mime", sourceMIME.map(JSONValue.string))
        members.append(optional: "source_url", sourceURL.map(JSONValue.string))
        members.append(("status", .string(status.rawValue)))
        members.append(optional: "thumbnail", thumbnail?.jsonValue)
        members.append(("timings_ms", timingsMs.jsonValue))
        members.append(optional: "vendor", vendor.map(JSONValue.string))
        members.append(optional: "warnings", warnings.map { .array($0.map(JSONValue.string)) })
        return members
    }
}

extension AttachmentInfo {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = [("bytes", .number(String(bytes)))]
        members.append(optional: "height", height.map { .number(String($0)) })
        members.append(("mime", .string(mime)))
        members.append(("url", .string(url)))
        members.append(optional: "uti", uti.map(JSONValue.string))
        members.append(optional: "width", width.map { .number(String($0)) })
        return .object(JSONObject(members))
    }
}

extension StageTimings {
    var jsonValue: JSONValue {
        .object(
            JSONObject([
                ("fetch", .number(fetch)), ("sniff", .number(sniff)), ("store", .number(store)),
                ("total", .number(total)), ("transcode", .number(transcode)),
            ]))
    }
}

extension MediaOutcome {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        members.append(optional: "attachment", attachment?.jsonValue)
        members.append(optional: "cache_hit", cacheHit.map(JSONValue.bool))
        members.append(optional: "hints", hints?.jsonValue)
        members.append(optional: "icon", icon?.jsonValue)
        members.append(optional: "message", message.map(JSONValue.string))
        members.append(("path", .string(path)))
        members.append(("platform", .string(platform)))
        members.append(optional: "reason", reason.map(JSONValue.string))
        members.append(optional: "revalidated", revalidated.map(JSONValue.bool))
        members.append(optional: "source_bytes", sourceBytes.map { .number(String($0)) })
        members.append(optional: "source_mime", sourceMIME.map(JSONValue.string))
        members.append(optional: "source_url", sourceURL.map(JSONValue.string))
        members.append(("status", .string(status.rawValue)))
        members.append(optional: "thumbnail", thumbnail?.jsonValue)
        return .object(JSONObject(members))
    }
}

extension ThumbnailHints {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        if let clip {
            let rect = JSONObject([
                ("height", .number(clip.height)), ("width", .number(clip.width)),
                ("x", .number(clip.x)), ("y", .number(clip.y)),
            ])
            members.append(("clip", .object(rect)))
        }
        members.append(optional: "frame", frame.map { .number(String($0)) })
        members.append(optional: "hidden", hidden.map(JSONValue.bool))
        members.append(optional: "time", time.map { .number($0) })
        return .object(JSONObject(members))
    }
}

extension Array where Element == (String, JSONValue) {
    fileprivate mutating func append(optional key: String, _ value: JSONValue?) {
        if let value { append((key, value)) }
    }
}
