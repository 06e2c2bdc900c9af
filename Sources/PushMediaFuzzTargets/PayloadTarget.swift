import Foundation
import PushMedia

// payload: JSON parse + the generic shape's locate and rewrite, and every vendor's shape, over
// arbitrary JSON.
extension FuzzTargets {
    /// Keys searched after the built-in ones (the `--media-key` option).
    static let extraKeys = ["media", "attachment_url", "rich-media"]
    /// Fields of the descriptor dropped, in this order, when the payload is over the limit.
    static let droppedOrder = [
        "items", "thumb", "icon", "bytes", "width", "height", "mime", "reason", "frame", "time", "clip", "hidden",
        "type",
    ]
    static let attachmentURL =
        "https://media.shop.example/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.jpg"

    /// Parses `data`; for an object, locates the generic shape's media reference and rewrites it
    /// every way the pipeline does (`Vendor.generic.slots`, `hasAlert`, `PayloadRewriter.rewrite`
    /// with edits), checking the rewriter's promises; then every vendor's shape (`checkVendors`).
    public static func payload(_ data: [UInt8]) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(data)
        } catch {
            precondition(
                error.offset >= 0 && error.offset <= data.count,
                "error offset \(error.offset) outside 0...\(data.count)")
            precondition(error.line >= 1 && error.column >= 1, "error position \(error.line):\(error.column)")
            precondition(!error.description.isEmpty)
            return
        }
        checkRoundTrip(value)
        guard case .object(let object) = value else { return }

        // Locate: the generic shape's reference is the first of the built-in keys, then the extra
        // keys, that is present. The last key too (unless it is the descriptor's), as if named by
        // `--media-key`.
        let extra = extraKeys + object.keys.suffix(1).filter { $0 != PayloadRewriter.descriptorKey }
        let keys = MediaLocator.builtInKeys + extra
        let slots = Vendor.generic.slots(in: object, extraKeys: extra, profile: .ios)
        precondition(slots.count <= 1, "the generic shape has \(slots.count) references")
        let slot = slots.first
        var mediaKey = "media_url"
        if let slot {
            guard slot.target.steps.count == 1, case let .key(key)? = slot.target.steps.first,
                slot.source == slot.target
            else {
                preconditionFailure("generic reference at \(slot.target), not a top-level key")
            }
            precondition(object[key] == slot.value, "located value differs from the payload's")
            let first = keys.first { object[$0] != nil }
            precondition(first == key, "located \(key), first present key is \(first ?? "none")")
            mediaKey = key
        } else {
            precondition(keys.allSatisfy { object[$0] == nil }, "a media key is present but not located")
        }
        let expectedAlert: Bool
        switch object["aps"]?.objectValue?["alert"] {
        case .string(let text)?: expectedAlert = !text.isEmpty
        case .object(let alert)?: expectedAlert = alert.count > 0
        default: expectedAlert = false
        }
        precondition(Vendor.generic.hasAlert(object) == expectedAlert, "hasAlert is not \(expectedAlert)")

        var medias: [PayloadRewriter.Media] = [.replace(with: attachmentURL), .remove, .keep]
        if let original = slot?.value.stringValue { medias.append(.replace(with: original)) }
        let cases = descriptors(for: slot?.value)
        // The pipeline's two main rewrites (accepted: new URL and a full descriptor; rejected:
        // media removed), then one more chosen by the input's bytes, sometimes under a limit taken
        // from the input's own size so that trimming the descriptor is exercised.
        let pick = data.reduce(data.count) { $0 &* 31 &+ Int($1) } & Int.max
        let tight = max(0, data.count - 64 + Int(data.last ?? 0))
        let runs: [(PayloadRewriter.Media, DescriptorCase, Int)] = [
            (medias[0], cases[min(1, cases.count - 1)], PayloadRewriter.apnsLimit),
            (.remove, cases[min(2, cases.count - 1)], PayloadRewriter.apnsLimit),
            (
                medias[pick % medias.count], cases[(pick / 8) % cases.count],
                (pick / 64) % 2 == 0 ? tight : PayloadRewriter.apnsLimit
            ),
        ]
        for (media, descriptor, limit) in runs {
            let edits = slots.map { PayloadRewriter.Edit(slot: $0, media: media) }
            let result = PayloadRewriter.rewrite(
                object, edits: edits, vendor: .generic, descriptor: descriptor.value,
                limit: limit)
            // Without a reference there is nothing to edit: the payload keeps its media key as it is.
            checkRewrite(
                result, of: object, mediaKey: mediaKey, media: slot == nil ? .keep : media,
                descriptor: descriptor, limit: limit)
        }
        checkVendors(object, extraKeys: extra)
    }

    // MARK: - every vendor's shape over the same object

    /// Each vendor's media references are where it says, detection picks a vendor that has some,
    /// and rewriting all of them (replaced, then removed) keeps the payload valid, puts each URL
    /// where it belongs, removes what it says, and leaves every unrelated top-level key alone.
    static func checkVendors(_ object: JSONObject, extraKeys: [String]) {
        let detected = Vendor.detect(object, extraKeys: extraKeys)
        let detectedSlots = detected.slots(in: object, extraKeys: extraKeys, profile: .ios)
        precondition(detected == .generic || !detectedSlots.isEmpty, "detected \(detected) without media")
        for vendor in Vendor.allCases {
            let slots = vendor.slots(in: object, extraKeys: extraKeys, profile: .ios)
            if !slots.isEmpty
                && Vendor.detectionOrder.firstIndex(of: vendor)! < Vendor.detectionOrder.firstIndex(of: detected)!
            {
                preconditionFailure("\(vendor) has media but \(detected) was detected")
            }
            guard !slots.isEmpty else { continue }
            for slot in slots {
                precondition(object[path: slot.source] == slot.value, "\(vendor): value at \(slot.source) differs")
            }
            var touched = Set(["aps", PayloadRewriter.descriptorKey, "message"])
            for slot in slots {
                let paths =
                    [slot.target, slot.source] + slot.removals
                    + [slot.typeField?.path, slot.iconTarget, slot.hintsPath].compactMap { $0 }
                for path in paths { if case let .key(key)? = path.steps.first { touched.insert(key) } }
            }
            let replaced = slots.enumerated().map { index, slot in
                PayloadRewriter.Edit(
                    slot: slot, media: .replace(with: attachmentURL + "?\(index)"), typeValue: "jpg",
                    icon: attachmentURL + "?icon", clip: ClipRect(x: 0.25, y: 0, width: 0.5, height: 1))
            }
            let descriptor = Descriptor(status: .processed, type: "public.jpeg")
            if let result = PayloadRewriter.rewrite(
                object, edits: replaced, vendor: vendor, descriptor: descriptor, limit: 1 << 30)
            {
                checkValid(result, of: object, untouched: touched, vendor: vendor)
                for (index, slot) in slots.enumerated() {
                    precondition(
                        object.canSet(at: slot.target),
                        "\(vendor): reference at \(slot.target), which cannot be written")
                    // A later reference can only overwrite an earlier one at the same target.
                    let last = slots.lastIndex { $0.target == slot.target }!
                    precondition(
                        result.payload[path: slot.target] == .string(attachmentURL + "?\(last)"),
                        "\(vendor): \(slot.target) does not hold its attachment URL (reference \(index))")
                }
            } else {
                preconditionFailure("\(vendor): rewrite without a size limit failed")
            }
            let removed = slots.map { PayloadRewriter.Edit(slot: $0, media: .remove) }
            guard
                let result = PayloadRewriter.rewrite(
                    object, edits: removed, vendor: vendor, descriptor: nil, limit: 1 << 30)
            else {
                preconditionFailure("\(vendor): removal without a size limit failed")
            }
            checkValid(result, of: object, untouched: touched, vendor: vendor)
            for slot in slots
            where !slot.removals.isEmpty
                && slot.removals.allSatisfy({ $0.steps.allSatisfy { if case .key = $0 { true } else { false } } })
            {
                for path in slot.removals {
                    precondition(result.payload[path: path] == nil, "\(vendor): \(path) survived its removal")
                }
            }
        }
    }

    static func checkValid(
        _ result: PayloadRewriter.Rewritten, of input: JSONObject, untouched touched: Set<String>, vendor: Vendor
    ) {
        precondition(
            result.bytes == JSONValue.object(result.payload).serialized(), "\(vendor): bytes differ from the payload")
        do {
            let reparsed = try JSONValue.parse(result.bytes)
            precondition(reparsed == .object(result.payload), "\(vendor): bytes re-parse differently")
        } catch {
            preconditionFailure("\(vendor): rewritten bytes do not parse: \(error)")
        }
        for (key, value) in input.members where !touched.contains(key) {
            precondition(result.payload[key] == value, "\(vendor): unrelated key \(key) changed")
        }
    }

    /// The descriptor the fuzz target passes, with what the checks expect of it: its status as
    /// written and the fields it sets.
    struct DescriptorCase {
        var value: Descriptor?
        var status: String?
        /// Fields set besides `v` and `status`, e.g. `mime`.
        var fields: [String]
    }

    /// No descriptor, then a processed, a rejected and a best-attempt one; `reference` is the value
    /// at the media key, if any.
    static func descriptors(for reference: JSONValue?) -> [DescriptorCase] {
        var cases = [DescriptorCase(value: nil, status: nil, fields: [])]
        let full = Descriptor(
            status: .processed, reason: nil, type: "public.jpeg", mime: "image/jpeg", bytes: 182_365,
            width: 2048, height: 1536,
            thumb: "https://media.shop.example/6f1177852cd8c0e4fa5ae7a8cc1bd1cba0e0c3b2ac2f7d40a0ddd09b2bca95df.jpg")
        cases.append(
            DescriptorCase(
                value: full, status: "processed", fields: ["type", "mime", "bytes", "width", "height", "thumb"]))
        // A reason taken from the payload, so it carries the input's escapes and unicode.
        let reason = reference?.stringValue ?? "unsupported_type"
        let rejected = Descriptor(
            status: .rejected, reason: reason, type: "org.webmproject.webp", mime: "image/webp",
            bytes: Int64.max, width: Int.min, height: 0, thumb: nil)
        cases.append(
            DescriptorCase(
                value: rejected, status: "rejected", fields: ["reason", "type", "mime", "bytes", "width", "height"]))
        cases.append(
            DescriptorCase(
                value: Descriptor(status: .bestAttempt, reason: "budget_exceeded"), status: "best_attempt",
                fields: ["reason"]))
        return cases
    }

    static func checkRewrite(
        _ result: PayloadRewriter.Rewritten?, of input: JSONObject, mediaKey: String,
        media: PayloadRewriter.Media, descriptor: DescriptorCase, limit: Int
    ) {
        let descriptorKey = PayloadRewriter.descriptorKey
        // The smallest form: media handled, mutable-content set, no descriptor.
        var base = input
        switch media {
        case let .replace(url): base[mediaKey] = .string(url)
        case .keep: break
        case .remove: base.removeValue(forKey: mediaKey)
        }
        if case .replace = media, var aps = base["aps"]?.objectValue {
            if aps["mutable-content"]?.intValue != 1 { aps["mutable-content"] = .number("1") }
            base["aps"] = .object(aps)
        }
        let baseBytes = JSONValue.object(base).serialized().count

        guard let result else {
            precondition(
                baseBytes > limit,
                "rewrite gave up though the payload without descriptor is \(baseBytes) ≤ \(limit) bytes")
            return
        }
        precondition(result.bytes.count <= limit, "rewritten payload is \(result.bytes.count) bytes, over \(limit)")
        let serialized = JSONValue.object(result.payload).serialized()
        precondition(result.bytes == serialized, "bytes differ from the serialized payload")
        let reparsed: JSONValue
        do { reparsed = try JSONValue.parse(result.bytes) } catch {
            preconditionFailure("rewritten bytes do not parse: \(error)")
        }
        precondition(reparsed == .object(result.payload), "rewritten bytes re-parse to a different payload")

        // Every other key keeps its value and its place.
        let payload = result.payload
        for (key, value) in input.members where key != mediaKey && key != descriptorKey {
            guard let now = payload[key] else { preconditionFailure("key \(key) was lost") }
            if key == "aps", case .replace = media, case .object(var before) = value, case .object(var after) = now {
                precondition(after["mutable-content"]?.intValue == 1, "aps.mutable-content is not 1 after replace")
                if before["mutable-content"] == nil {
                    precondition(after.keys.last == "mutable-content", "mutable-content not appended to aps")
                }
                before.removeValue(forKey: "mutable-content")
                after.removeValue(forKey: "mutable-content")
                precondition(before == after, "aps changed beyond mutable-content")
            } else {
                precondition(now == value, "value of \(key) changed")
            }
        }
        let others: (String) -> Bool = { $0 != mediaKey && $0 != descriptorKey }
        precondition(input.keys.filter(others) == payload.keys.filter(others), "key order changed")
        precondition(payload.keys.allSatisfy { !others($0) || input[$0] != nil }, "a key was added")

        // The media key.
        switch media {
        case let .replace(url): precondition(payload[mediaKey] == .string(url), "media key does not hold the new URL")
        case .keep: precondition(payload[mediaKey] == input[mediaKey], "kept media key changed")
        case .remove: precondition(payload[mediaKey] == nil, "removed media key is still there")
        }

        // The descriptor and what was trimmed from it.
        let dropped = result.droppedFields
        guard let status = descriptor.status else {
            precondition(dropped.isEmpty, "fields dropped without a descriptor")
            precondition(payload[descriptorKey] == base[descriptorKey], "descriptor key changed without a descriptor")
            precondition(result.bytes.count == baseBytes)
            return
        }
        let droppedOrder = Self.droppedOrder.filter(descriptor.fields.contains)
        if dropped.last == descriptorKey {
            precondition(Array(dropped.dropLast()) == droppedOrder, "descriptor dropped before its fields: \(dropped)")
            precondition(payload[descriptorKey] == nil, "descriptor dropped but a pushmedia key remains")
            if let full = descriptor.value {
                var smallest = base
                smallest[descriptorKey] = full.json(omitting: Set(droppedOrder))
                precondition(
                    JSONValue.object(smallest).serialized().count > limit,
                    "descriptor dropped though its smallest form fitted")
            }
            return
        }
        precondition(dropped == Array(droppedOrder.prefix(dropped.count)), "fields dropped out of order: \(dropped)")
        guard case .object(let written)? = payload[descriptorKey] else { preconditionFailure("descriptor missing") }
        precondition(written["v"] == .number("1") && written["status"] == .string(status), "descriptor v/status wrong")
        for field in descriptor.fields {
            precondition(
                (written[field] != nil) != dropped.contains(field),
                "descriptor field \(field) present: \(written[field] != nil), dropped: \(dropped)")
        }
        precondition(
            written.count == 2 + descriptor.fields.filter { !dropped.contains($0) }.count,
            "unexpected descriptor fields")
        if !dropped.isEmpty, let full = descriptor.value {
            // Trimming stops as soon as it fits: with the last field kept it would not have.
            var fuller = base
            fuller[descriptorKey] = full.json(omitting: Set(dropped.dropLast()))
            precondition(
                JSONValue.object(fuller).serialized().count > limit,
                "dropped \(dropped.last!) though the payload fitted with it")
        }
    }

    /// `serialized()` and `prettySerialized()` of a parsed value parse back to the same value, and
    /// the depth limit is exact: the value parses with `maxDepth` = its depth, not with one less.
    static func checkRoundTrip(_ value: JSONValue) {
        let compact = value.serialized()
        let levels = depth(value)
        do {
            let limited = try JSONValue.parse(compact, maxDepth: levels)
            precondition(limited == value, "value parsed with maxDepth \(levels) differs")
        } catch {
            preconditionFailure("value of depth \(levels) rejected with maxDepth \(levels): \(error)")
        }
        if levels > 0 {
            do {
                _ = try JSONValue.parse(compact, maxDepth: levels - 1)
                preconditionFailure("value of depth \(levels) accepted with maxDepth \(levels - 1)")
            } catch {
                precondition(error.reason == .tooDeep, "maxDepth \(levels - 1) gave \(error) instead of tooDeep")
            }
        }
        precondition(
            compact.count == value.compactByteCount, "compactByteCount \(value.compactByteCount) ≠ \(compact.count)")
        do {
            let again = try JSONValue.parse(compact)
            precondition(again == value, "serialized value re-parses differently")
            precondition(again.serialized() == compact, "serialization is not stable")
            let pretty = try JSONValue.parse(value.prettySerialized())
            precondition(pretty == value, "pretty-serialized value re-parses differently")
        } catch {
            preconditionFailure("serialized value does not parse: \(error)")
        }
    }

    /// Nesting depth as the parser counts it: scalars 0, `[]` and `{}` 1.
    static func depth(_ value: JSONValue) -> Int {
        switch value {
        case .array(let items): 1 + (items.map(depth).max() ?? 0)
        case .object(let object): 1 + (object.members.map { depth($0.value) }.max() ?? 0)
        default: 0
        }
    }
}
