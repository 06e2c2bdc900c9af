/// Multi-image templates: carousels, push stories and sliders, whose vendor SDK on the phone
/// downloads every image when the notification is shown. Each template's images are found in
/// the payload's data map (the top level, an FCM message's `data`, CleverTap's `pt_json`
/// string) and made together: the template's documented shape and byte limit for each, and on
/// Android one budget of decoded bitmap bytes for the whole notification. docs/templates.md
/// lists each vendor's keys and limits with their sources.
public enum Templates {
    /// Android strips a notification's custom views whose bitmaps pass this many decoded bytes
    /// (`config_notificationStripRemoteViewSizeBytes`: width × height × 4, summed).
    public static let androidBitmapLimit: Int64 = 5_000_000
    /// Pages made of one template at most (a bound on what a payload can ask for; CleverTap's
    /// five icons and product display take fewer, see `Spec.maximum`).
    public static let maximumPages = 10
    /// Frames CleverTap's SDK extracts from a `pt_gif` when `pt_gif_frames` is absent.
    public static let defaultGIFFrames = 10

    /// The documented rules for one kind of template image.
    public struct Spec: Sendable, Equatable {
        /// Width : height it is cropped to; nil keeps the shape (an animation, fitted).
        public var aspect: Double?
        /// Longest side when the decoded-bytes budget allows it.
        public var edge: Int
        /// Largest file.
        public var maxBytes: Int64
        /// Pages the template needs (fewer: the vendor's fallback); 0 for single images.
        public var minimum: Int = 0
        /// Pages it takes at most.
        public var maximum: Int = Templates.maximumPages
        /// Where the numbers come from, named in messages.
        public var source: String

        /// `spec` needing `minimum` pages.
        init(_ spec: Spec, minimum: Int) {
            self = spec
            self.minimum = minimum
        }

        init(
            aspect: Double?, edge: Int, maxBytes: Int64, minimum: Int = 0, maximum: Int = Templates.maximumPages,
            source: String
        ) {
            self.aspect = aspect
            self.edge = edge
            self.maxBytes = maxBytes
            self.minimum = minimum
            self.maximum = maximum
            self.source = source
        }

        /// `3:2`, `16:9`, `1:1`.
        public var aspectText: String? {
            guard let aspect else { return nil }
            for height in 1...9 {
                let width = aspect * Double(height)
                if abs(width - width.rounded()) < 0.001 { return "\(Int(width.rounded())):\(height)" }
            }
            return String(aspect)
        }
    }

    /// CleverTap Push Templates (Android), docs/CTPUSHTEMPLATES.md: carousels 3:2 at most 86 KB
    /// (at least 3 images), five icons 1:1 at most 50 KB, basic 500 KB, timer 326 KB.
    static let carouselPage = Spec(
        aspect: 1.5, edge: 600, maxBytes: 86_000, minimum: 3, source: "CleverTap's carousel")
    static let productPage = Spec(
        aspect: 1, edge: 450, maxBytes: 86_000, minimum: 3, maximum: 3, source: "CleverTap's product display")
    static let icons = Spec(
        aspect: 1, edge: 300, maxBytes: 50_000, minimum: 3, maximum: 5, source: "CleverTap's five icons")
    static let bigImage = Spec(aspect: 2, edge: 1080, maxBytes: 500_000, source: "CleverTap's basic template")
    static let timerImage = Spec(aspect: 2, edge: 1080, maxBytes: 326_000, source: "CleverTap's timer template")
    static let gif = Spec(aspect: nil, edge: 300, maxBytes: 500_000, source: "CleverTap's GIF")
    static let largeIcon = Spec(aspect: 1, edge: 192, maxBytes: 50_000, source: "CleverTap's large icon")
    /// Braze push stories: 2:1, about 500 KB a page.
    static let storyPage = Spec(aspect: 2, edge: 1080, maxBytes: 500_000, minimum: 1, source: "Braze's push story")
    /// CleverTap's iOS content slider: 16:9 when landscape, square otherwise.
    static func sliderPage(landscape: Bool) -> Spec {
        Spec(
            aspect: landscape ? 16.0 / 9 : 1, edge: 1080, maxBytes: 1_000_000, minimum: 1,
            source: "CleverTap's iOS content slider")
    }

    /// One image of a template as found, before the plan gives it its size.
    struct Found {
        var slot: MediaSlot
        var role: TemplateRole
        var spec: Spec
        /// Frames the phone decodes (a GIF's extracted frames), 1 for a still.
        var frames: Int
        var android: Bool
    }

    /// Every template image of the data map at `data` in `payload`, in the shapes of `vendors`
    /// (CleverTap's and Braze's), planned together.
    static func slots(in payload: JSONObject, data: JSONPath, vendors: [Vendor]) -> [MediaSlot] {
        guard let map = payload[path: data]?.objectValue else { return [] }
        var found: [Found] = []
        if vendors.contains(.clevertap) {
            found += cleverTap(map, at: data)
            found += slider(payload, at: data)
        }
        if vendors.contains(.braze) { found += brazeStory(map, at: data) }
        return plan(found)
    }

    /// What is wrong with the templates' own JSON in `payload`, for the outcome's warnings: a
    /// `pt_json` or `ct_ContentSlider` string that is not a JSON object (left as it was, its
    /// images not made), and an image key given both in `pt_json` and beside it (both made).
    static func problems(in payload: JSONObject) -> [String] {
        let roots = [JSONPath([])] + (Vendor.fcmMessageRoot(payload).map { [$0.appending(key: "data")] } ?? [])
        var problems: [String] = []
        for root in roots {
            guard let map = payload[path: root]?.objectValue else { continue }
            for key in ["pt_json", "ct_ContentSlider"] {
                guard let text = map[key]?.stringValue else { continue }
                let place = root.appending(key: key).description
                do {
                    guard case let .object(document) = try JSONValue.parse(Array(text.utf8)) else {
                        problems.append("\(place) is not a JSON object: left as it was, and no image in it is made")
                        continue
                    }
                    let twice = document.keys.filter { $0.hasPrefix("pt_") && map[$0] != nil && $0 != "pt_json" }
                    if !twice.isEmpty {
                        problems.append(
                            "\(twice.joined(separator: ", ")) given both in \(place) and beside it: each is made where "
                                + "it is")
                    }
                } catch {
                    problems.append("\(place) is not valid JSON (\(error)): left as it was, and no image in it is made")
                }
            }
        }
        return problems
    }

    // MARK: CleverTap Push Templates

    /// `pt_img1…N`, `pt_big_img…`, `pt_gif`, `pt_ico`, at the top of the data map and inside its
    /// `pt_json` string. The template is `pt_id` (inside `pt_json` first, as the SDK merges it
    /// over the map).
    private static func cleverTap(_ map: JSONObject, at data: JSONPath) -> [Found] {
        let jsonPath = data.appending(key: "pt_json").appending(.embedded)
        let json = JSONValue.object(map)[path: JSONPath([.key("pt_json"), .embedded])]?.objectValue
        let places: [(object: JSONObject, path: JSONPath)] =
            [(map, data)] + (json.map { [($0, jsonPath)] } ?? [])
        guard places.contains(where: { $0.object.keys.contains { $0.hasPrefix("pt_") } }) else { return [] }
        let idPlace = places.reversed().first { $0.object["pt_id"]?.stringValue != nil }
        let template = idPlace?.object["pt_id"]?.stringValue ?? "pt_basic"
        let idPath = idPlace.map { $0.path.appending(key: "pt_id") }
        // Templates without pages of their own take `pt_imgN` as carousel images that set no
        // minimum (the SDK finds images by any key containing `pt_img`).
        let page: Spec =
            switch template {
            case "pt_product_display": productPage
            case "pt_five_icons": icons
            case "pt_carousel", "pt_manual_carousel": carouselPage
            default: Spec(carouselPage, minimum: 0)
            }
        let single = template == "pt_timer" ? timerImage : bigImage
        // A page's keys besides its image: the carousels' alt text, and the deep link, prices
        // and texts of templates whose pages each have their own.
        let pageSiblings: [String] =
            switch template {
            case "pt_product_display": ["_alt_text", "pt_bt", "pt_st", "pt_price", "pt_dl"]
            case "pt_manual_carousel", "pt_five_icons": ["_alt_text", "pt_dl"]
            default: ["_alt_text"]
            }
        var found: [Found] = []
        for (object, path) in places {
            var pages: [(number: Int, key: String)] = []
            for key in object.keys where object[key]?.stringValue != nil {
                let digits = key.dropFirst(6)
                if key.hasPrefix("pt_img"), let number = Int(digits), number >= 0, String(number) == digits {
                    pages.append((number, key))
                }
            }
            pages.sort { $0.number < $1.number }
            for (position, item) in pages.enumerated() {
                let removals = pageSiblings.map { sibling in
                    path.appending(key: sibling.hasPrefix("_") ? item.key + sibling : sibling + String(item.number))
                }
                guard let slot = slot(at: path.appending(key: item.key), in: object, key: item.key, removals: removals)
                else { continue }
                found.append(
                    Found(
                        slot: slot,
                        role: TemplateRole(
                            template: template, page: item.number, minimumPages: page.minimum, data: path,
                            idPath: idPath, excess: position >= page.maximum),
                        spec: page, frames: 1, android: true))
            }
            let singles: [(key: String, spec: Spec, siblings: [String])] = [
                ("pt_big_img", single, ["pt_big_img_alt_text"]), ("pt_big_img_alt", single, []),
                ("pt_big_img_collapsed", single, ["pt_big_img_collapsed_alt_text"]),
                ("pt_gif", gif, ["pt_gif_frames"]), ("pt_gif_alt", gif, ["pt_gif_frames_alt"]),
                ("pt_gif_collapsed", gif, ["pt_gif_frames_collapsed"]), ("pt_ico", largeIcon, []),
            ]
            for (key, spec, siblings) in singles {
                guard
                    let slot = slot(
                        at: path.appending(key: key), in: object, key: key,
                        removals: siblings.map { path.appending(key: $0) })
                else { continue }
                var frames = 1
                if spec == gif {
                    let framesKey = siblings.first ?? "pt_gif_frames"
                    frames =
                        object[framesKey]?.stringValue.flatMap { Int($0) } ?? object[framesKey]?.intValue
                        ?? defaultGIFFrames
                    frames = min(max(frames, 1), 100)
                }
                found.append(
                    Found(
                        slot: slot,
                        role: TemplateRole(
                            template: template, page: nil, minimumPages: 0, data: path, idPath: idPath,
                            excess: false),
                        spec: spec, frames: frames, android: true))
            }
        }
        return found
    }

    // MARK: CleverTap's iOS content slider

    /// `ct_ContentSlider.items[].imageUrl` (the slider an object, or a JSON string as a campaign
    /// tool's key-value pairs send it); `orientation` `landscape` is 16:9, else square.
    private static func slider(_ payload: JSONObject, at data: JSONPath) -> [Found] {
        var base = data.appending(key: "ct_ContentSlider")
        if payload[path: base]?.stringValue != nil { base = base.appending(.embedded) }
        guard let slider = payload[path: base]?.objectValue, let items = slider["items"]?.arrayValue else { return [] }
        let spec = sliderPage(landscape: slider["orientation"]?.stringValue == "landscape")
        var found: [Found] = []
        for index in items.indices {
            let item = base.appending(key: "items").appending(.index(index))
            guard let value = payload[path: item.appending(key: "imageUrl")] else { continue }
            let slot = MediaSlot(
                source: item.appending(key: "imageUrl"), target: item.appending(key: "imageUrl"), platform: .ios,
                typeField: nil, removals: [item], givenHints: nil, hintsPath: nil, iconTarget: nil, value: value)
            found.append(
                Found(
                    slot: slot,
                    role: TemplateRole(
                        template: "ct_ContentSlider", page: index, minimumPages: 1, data: base, idPath: nil,
                        excess: index >= maximumPages),
                    spec: spec, frames: 1, android: false))
        }
        return found
    }

    // MARK: Braze push stories

    /// `ab_cN_i` for each page N (from 0), with the page's other `ab_cN_*` keys; present only
    /// with `ab_c`.
    private static func brazeStory(_ map: JSONObject, at data: JSONPath) -> [Found] {
        guard map["ab_c"] != nil else { return [] }
        var pages: [Int] = []
        for key in map.keys where key.hasPrefix("ab_c") && key.hasSuffix("_i") {
            let digits = key.dropFirst(4).dropLast(2)
            if let number = Int(digits), number >= 0, String(number) == digits { pages.append(number) }
        }
        pages.sort()
        var found: [Found] = []
        for (position, number) in pages.enumerated() {
            let prefix = "ab_c\(number)_"
            let removals = map.keys.filter { $0.hasPrefix(prefix) }.map { data.appending(key: $0) }
            guard let slot = slot(at: data.appending(key: prefix + "i"), in: map, key: prefix + "i", removals: removals)
            else { continue }
            found.append(
                Found(
                    slot: slot,
                    role: TemplateRole(
                        template: "ab_c", page: number, minimumPages: storyPage.minimum, data: data, idPath: nil,
                        excess: position >= maximumPages),
                    spec: storyPage, frames: 1, android: true))
        }
        return found
    }

    /// A slot for the string at `key` of `object` (which sits at `path.parent`).
    private static func slot(at path: JSONPath, in object: JSONObject, key: String, removals: [JSONPath]) -> MediaSlot?
    {
        guard let value = object[key], value.stringValue != nil else { return nil }
        return MediaSlot(
            source: path, target: path, platform: .android, typeField: nil, removals: [path] + removals,
            givenHints: nil, hintsPath: nil, iconTarget: nil, value: value)
    }

    // MARK: The plan

    /// Gives each image its profile: the template's shape and byte limit, and a long edge that
    /// keeps every Android image's decoded bitmaps (× the frames the SDK extracts) of the
    /// notification together under `androidBitmapLimit`, each made smaller by the same factor
    /// (never dropped for size).
    static func plan(_ found: [Found]) -> [MediaSlot] {
        var edges = found.map(\.spec.edge)
        let counted = found.indices.filter { found[$0].android && !found[$0].role.excess }
        let budget = androidBitmapLimit / 4 - 1
        func total() -> Int64 {
            counted.reduce(0) { $0 + pixels(edge: edges[$1], aspect: found[$1].spec.aspect) * Int64(found[$1].frames) }
        }
        if total() > budget {
            // One factor for every image, so pages of one shape stay one size; lowered in small
            // steps while rounding (a height rounded up) leaves it a few pixels over.
            var factor = (Double(budget) / Double(total())).squareRoot()
            repeat {
                for index in counted { edges[index] = max(16, Int(Double(found[index].spec.edge) * factor)) }
                factor -= 0.0005
            } while total() > budget && factor > 0
        }
        return found.indices.map { index in
            let item = found[index]
            var slot = item.slot
            var role = item.role
            role.spec = item.spec
            role.frames = item.frames
            role.decodedLimit = item.android ? androidBitmapLimit : nil
            slot.template = role
            slot.platform = profile(item, edge: edges[index])
            return slot
        }
    }

    /// Media URL presets for template images (`pr:carousel`, …), for a campaign tool's template
    /// fields: each image made as a template of `presetPages` such images is planned (a media URL
    /// names one image and cannot know its siblings).
    public static let presets: [String: PlatformProfile] = {
        let kinds: [(name: String, template: String, spec: Spec, android: Bool)] = [
            ("carousel", "pt_carousel", carouselPage, true), ("icon", "pt_five_icons", icons, true),
            ("story", "ab_c", storyPage, true), ("slider", "ct_ContentSlider", sliderPage(landscape: true), false),
        ]
        var presets: [String: PlatformProfile] = [:]
        for kind in kinds {
            let slot = MediaSlot(
                source: JSONPath(keys: "url"), target: JSONPath(keys: "url"), platform: .android, typeField: nil,
                removals: [], givenHints: nil, hintsPath: nil, iconTarget: nil, value: .null)
            let role = TemplateRole(
                template: kind.template, page: 1, minimumPages: 0, data: JSONPath([]), idPath: nil, excess: false)
            let found = Found(slot: slot, role: role, spec: kind.spec, frames: 1, android: kind.android)
            presets[kind.name] = plan(Array(repeating: found, count: presetPages)).first?.platform
        }
        return presets
    }()
    /// Pages a preset's image is planned among.
    public static let presetPages = 5

    /// The most pixels an image at long edge `edge` in `aspect` has: made (`Transcoder.box`), or
    /// passed through as it came within the 1 % a shape may be off (`PlatformProfile.hasShape`).
    static func pixels(edge: Int, aspect: Double?) -> Int64 {
        guard let aspect else { return Int64(edge) * Int64(edge) }
        let made = (Double(edge) / aspect).rounded()
        let passed = (Double(edge) / (aspect * 0.99)).rounded(.down)
        return Int64(edge) * Int64(max(made, passed))
    }

    /// The platform's profile made for the template image: its shape, long edge and byte limit;
    /// on Android JPEG, PNG and WebP as they are, and a GIF kept a GIF (the SDK takes `pt_gif`
    /// only from a URL ending in `.gif`).
    private static func profile(_ item: Found, edge: Int) -> PlatformProfile {
        var profile: PlatformProfile = item.android ? .android : .ios
        profile.variant =
            "\(item.role.template).\(item.role.page == nil ? item.slot.target.lastKey ?? "image" : "page")"
        profile.aspect = item.spec.aspect
        profile.longEdge = edge
        profile.maxImageBytes = item.spec.maxBytes
        profile.maxAudioBytes = 0
        profile.maxVideoBytes = 0
        profile.thumbnail = false
        profile.source = item.spec.source
        if item.android { profile.acceptedFormats = [.jpeg, .png, .webp] }
        if item.spec.aspect == nil {
            profile.acceptedFormats = [.gif]
            profile.animation = true
            profile.delivers = .gif
            profile.alpha = true
        }
        return profile
    }
}

/// Where a media reference sits in a multi-image template, and the rules it was made by.
public struct TemplateRole: Sendable, Equatable {
    /// The template as its vendor names it: `pt_carousel` (CleverTap's `pt_id`), `ab_c` (a Braze
    /// push story), `ct_ContentSlider`.
    public var template: String
    /// The page's number as the payload gives it (`pt_img3`: 3, `ab_c2_i`: 2, `items[1]`: 1); nil
    /// for an image that is not a page (`pt_big_img`, `pt_gif`, `pt_ico`).
    public var page: Int?
    /// Pages the template needs: with fewer, it falls back as its vendor's SDK does.
    public var minimumPages: Int
    /// The data map (or `pt_json` document, or slider) the template's keys are in.
    public var data: JSONPath
    /// Where `pt_id` is, for a fallback to `pt_basic`.
    public var idPath: JSONPath?
    /// Past the template's maximum count: removed from the payload, never fetched.
    public var excess: Bool
    /// The documented rules it is made by.
    public var spec = Templates.Spec(aspect: nil, edge: 0, maxBytes: 0, source: "")
    /// Frames the phone decodes.
    public var frames = 1
    /// The notification's decoded-bitmap limit it counts against (Android), if any.
    public var decodedLimit: Int64?
}

extension JSONPath {
    /// The last step's key, if it is one.
    var lastKey: String? {
        if case let .key(key)? = steps.last { return key }
        return nil
    }
}
