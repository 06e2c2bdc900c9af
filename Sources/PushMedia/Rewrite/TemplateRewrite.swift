extension Templates {
    /// After a payload's edits: each template left with fewer pages than it needs falls back as
    /// its vendor's SDK would, and a Braze story's pages are numbered from 0 without a gap (its
    /// SDK shows pages up to the first missing `ab_cN_i`). Returns what was done, for the outcome.
    static func finish(_ payload: inout JSONObject, edits: [PayloadRewriter.Edit]) -> [String] {
        var notes: [String] = []
        var order: [String] = []
        var pages: [String: [PayloadRewriter.Edit]] = [:]
        for edit in edits {
            guard let role = edit.slot.template, role.page != nil, !role.excess else { continue }
            if pages[role.template] == nil { order.append(role.template) }
            pages[role.template, default: []].append(edit)
        }
        for template in order {
            guard let group = pages[template], let role = group.first?.slot.template else { continue }
            let kept = group.filter { $0.media != .remove }
            if template == "ab_c", let note = renumberStory(&payload, at: role.data) { notes.append(note) }
            guard kept.count < role.minimumPages else { continue }
            let summary =
                "\(template) kept \(kept.count) of its \(group.count) images, under the \(role.minimumPages) it needs"
            switch template {
            case "pt_carousel", "pt_manual_carousel", "pt_product_display":
                // CleverTap's SDK renders such a carousel as its basic template with one image.
                let parent = role.idPath?.parent ?? role.data
                payload.set(.string("pt_basic"), at: parent.appending(key: "pt_id"))
                var made = ""
                if let first = kept.first, payload[path: parent.appending(key: "pt_big_img")] == nil {
                    let url: JSONValue =
                        if case let .replace(url) = first.media { .string(url) } else { first.slot.value }
                    payload.set(url, at: parent.appending(key: "pt_big_img"))
                    made = ", its first image as pt_big_img"
                }
                notes.append("\(summary): sent as pt_basic\(made), as CleverTap's SDK falls back")
            case "pt_five_icons":
                notes.append("\(summary): CleverTap's SDK shows its basic notification instead")
            default:
                notes.append("\(summary): the notification is shown without them")
            }
        }
        return notes
    }

    /// Numbers a Braze story's pages `ab_c0_…`, `ab_c1_…` in their order, closing gaps left by
    /// removed pages or given in the payload; nil when they already were.
    private static func renumberStory(_ payload: inout JSONObject, at data: JSONPath) -> String? {
        guard let map = payload[path: data]?.objectValue else { return nil }
        func page(_ key: String) -> (number: Int, rest: Substring)? {
            guard key.hasPrefix("ab_c"), let underscore = key.dropFirst(4).firstIndex(of: "_") else { return nil }
            let digits = key[key.index(key.startIndex, offsetBy: 4)..<underscore]
            guard let number = Int(digits), String(number) == digits else { return nil }
            return (number, key[underscore...])
        }
        let numbers = Set(map.keys.compactMap { key in page(key).flatMap { $0.rest == "_i" ? $0.number : nil } })
        let sorted = numbers.sorted()
        guard sorted != Array(0..<sorted.count) else { return nil }
        let renumbered = Dictionary(uniqueKeysWithValues: sorted.enumerated().map { ($1, $0) })
        let members = map.members.compactMap { member -> (String, JSONValue)? in
            guard let (number, rest) = page(member.key) else { return (member.key, member.value) }
            // The keys of a page without an image (removed, or never given one) go with it.
            guard let new = renumbered[number] else { return nil }
            return ("ab_c\(new)\(rest)", member.value)
        }
        payload.set(.object(JSONObject(members)), at: data)
        return "ab_c pages numbered 0…\(sorted.count - 1) (were \(sorted.map(String.init).joined(separator: ", "))): "
            + "Braze shows a story's pages up to the first missing ab_cN_i"
    }
}
