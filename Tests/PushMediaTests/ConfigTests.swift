import PushMediaTestSupport
import Testing

@testable import PushMedia

@Suite("Configuration")
struct ConfigTests {
    @Test func defaultsAreDocumentedValues() {
        let config = PushMediaConfig()
        #expect(config.budget == .seconds(10))
        #expect(config.longEdge == 2048)
        #expect(config.thumbnailEdge == 512)
        #expect(config.maxPixels == 50_000_000)
        #expect(config.maxSourceBytes == 200_000_000)
        #expect(config.profile.maxImageBytes == 10_000_000)
        #expect(config.profile.maxAudioBytes == 5_000_000)
        #expect(config.profile.maxVideoBytes == 50_000_000)
        #expect(config.onReject == .drop)
        #expect(!config.allowPrivateNetworks)
    }

    @Test func environmentOverridesDefaults() throws {
        let config = try PushMediaConfig.fromEnvironment([
            "PUSHMEDIA_BUDGET": "2.5s", "PUSHMEDIA_STORE": "/tmp/x", "PUSHMEDIA_ON_REJECT": "keep",
            "PUSHMEDIA_ALLOW_PRIVATE_NETWORKS": "true", "PUSHMEDIA_MEDIA_KEYS": "posterImageURL, hero",
            "PUSHMEDIA_BASE_URL": "https://cdn.example.com/push/", "PUSHMEDIA_LONG_EDGE": "1024", "UNRELATED": "1",
        ])
        #expect(config.budget == .milliseconds(2500))
        #expect(config.storeLocation == "/tmp/x")
        #expect(config.onReject == .keep)
        #expect(config.allowPrivateNetworks)
        #expect(config.extraMediaKeys == ["posterImageURL", "hero"])
        #expect(config.baseURL == "https://cdn.example.com/push")
        #expect(config.longEdge == 1024)
    }

    @Test func invalidValuesNameTheVariableAndTheExpectation() {
        #expect {
            _ = try PushMediaConfig.fromEnvironment(["PUSHMEDIA_BUDGET": "soon"])
        } throws: { error in
            "\(error)".contains("PUSHMEDIA_BUDGET") && "\(error)".contains("duration")
        }
        var config = PushMediaConfig()
        #expect(throws: ConfigError.self) { try config.set("on-reject", to: "explode") }
        #expect(throws: ConfigError.self) { try config.set("long-edge", to: "0") }
        #expect(throws: ConfigError.self) { try config.set("base-url", to: "cdn.example.com") }
    }

    @Test func profileVendorCropAndThumbnailHints() throws {
        #expect(
            PushMediaConfig().profile == .ios && PushMediaConfig().vendor == nil && PushMediaConfig().crop == .attention
        )
        let config = try PushMediaConfig.fromEnvironment([
            "PUSHMEDIA_PROFILE": "huawei", "PUSHMEDIA_VENDOR": "OneSignal", "PUSHMEDIA_CROP": "center",
            "PUSHMEDIA_THUMB_ASPECT": "16:9", "PUSHMEDIA_THUMB_HIDDEN": "yes",
        ])
        #expect(config.profile == .huawei && config.profile.maxImageBytes == 511_999)
        #expect(config.vendor == .onesignal)
        #expect(config.crop == .centre)
        #expect(abs((config.thumbnailAspect ?? 0) - 16.0 / 9.0) < 1e-9)
        #expect(config.thumbnailHidden)
        var back = config
        try back.apply([("vendor", "auto"), ("thumb-aspect", "none"), ("profile", "web")])
        #expect(back.vendor == nil && back.thumbnailAspect == nil && back.profile.iconEdge == 192)
        for (name, value) in [
            ("profile", "windows"), ("vendor", "sendgrid"), ("crop", "smart"), ("thumb-aspect", "1:0"),
            ("thumb-aspect", "square"),
        ] {
            #expect { try back.set(name, to: value) } throws: {
                "\($0)".contains("--\(name)") && "\($0)".contains(value)
            }
        }
    }

    @Test func fetchAndEncoderSettings() throws {
        var config = PushMediaConfig()
        try config.apply([
            ("jpeg-quality", "70"), ("connect-timeout", "500ms"), ("low-speed-time", "2s"),
            ("max-redirects", "0"),
        ])
        #expect(config.jpegQuality == 70 && config.maxRedirects == 0)
        #expect(config.connectTimeout == .milliseconds(500) && config.lowSpeedTime == .seconds(2))
        for (name, value) in [("jpeg-quality", "5"), ("connect-timeout", "soon"), ("max-redirects", "21")] {
            #expect { try config.set(name, to: value) } throws: {
                "\($0)".contains("--\(name)") && "\($0)".contains(value)
            }
        }
    }

    /// The server's settings are `ServerConfig`'s (in PushMediaServer), not the library's.
    @Test func serverSettingsAreNotTheLibrarys() {
        var config = PushMediaConfig()
        #expect { try config.set("host", to: "0.0.0.0") } throws: { "\($0)" == "unknown setting --host" }
        #expect(PushMediaConfig.setting(named: "max-jobs")?.commands == [.serve])
    }

    /// `pushmedia serve` replaces a background limit that was not given by its own default.
    @Test func backgroundLimitKnowsWhetherItWasGiven() throws {
        var config = PushMediaConfig()
        #expect(config.backgroundLimit == .zero && config.givenBackgroundLimit == nil)
        try config.set("background-limit", to: "0")
        #expect(config.backgroundLimit == .zero && config.givenBackgroundLimit == .zero)
        config = try PushMediaConfig.fromEnvironment(["PUSHMEDIA_BACKGROUND_LIMIT": "5s"])
        #expect(config.givenBackgroundLimit == .seconds(5))
    }

    @Test("durations", arguments: [("10", 10_000), ("2.5", 2_500), ("800ms", 800), ("1.5s", 1_500), ("2m", 120_000)])
    func parsesDurations(_ text: String, _ milliseconds: Int64) {
        #expect(PushMediaConfig.parseDuration(text) == .milliseconds(milliseconds))
    }

    @Test func rejectsBadDurations() {
        #expect(PushMediaConfig.parseDuration("-1") == nil)
        #expect(PushMediaConfig.parseDuration("fast") == nil)
        #expect(PushMediaConfig.parseDuration("1e9") == nil)
    }
}
