import ArgumentParser
import Foundation
import PushMedia
import PushMediaServer

struct URLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the media URL of a source: the URL to paste into a campaign tool's image field.",
        discussion: """
            Signs with the first --url-key and --url-salt (or PUSHMEDIA_URL_KEY and PUSHMEDIA_URL_SALT), \
            as `pushmedia serve` checks them; without a key the URL is unsigned (insecure/…), which serve \
            answers only for sources under --url-allow-source. The URL is the one imgproxy's URL builders \
            make with the same key and salt. Exit status: 0 printed, 64 usage error.
            """
    )

    @Argument(help: "The source: an http(s) URL of an image, audio or video file.")
    var source: String
    @Option(
        help: ArgumentHelp(
            "The platform profile (the URL's pr: option): ios, android, huawei or web, or a template image's: "
                + "carousel, icon, story or slider."))
    var profile = PlatformProfile.ios.id
    @Option(help: "The extension asked for: jpg, png, gif, mp4, m4a or mp3; none lets the profile choose.")
    var ext: String?
    @Flag(help: "Write the source as plain/<percent-encoded URL>@ext instead of Base64.")
    var plain = false
    @Option(help: "Where `pushmedia serve` is reached, e.g. https://media.shop.example.")
    var origin = "http://127.0.0.1:8080"
    @Option(name: .customLong("url-key"), help: .setting("url-key"))
    var urlKey: [String] = []
    @Option(name: .customLong("url-salt"), help: .setting("url-salt"))
    var urlSalt: [String] = []

    func run() throws {
        let keys: [MediaURLKey]
        do {
            let environment = ProcessInfo.processInfo.environment
            let file = try environment["PUSHMEDIA_CONFIG"].map(SettingsFile.read)
            var server = try ServerConfig.fromSources(file: file, environment: environment)
            try server.apply(urlKey.map { ("url-key", $0) } + urlSalt.map { ("url-salt", $0) })
            keys = try server.urls.signingKeys()
        } catch { throw ValidationError("\(error)") }
        guard PlatformProfile.preset(named: profile) != nil else {
            throw ValidationError("unknown profile \"\(profile)\": use \(PlatformProfile.presetNames)")
        }
        if let ext, MediaURL.formats[ext.lowercased()] == nil {
            throw ValidationError("\"\(ext)\" is not a format media URLs deliver: use jpg, png, gif, mp4, m4a or mp3")
        }
        let signedPath = MediaURL.unsignedPath(source: source, options: ["pr:" + profile], ext: ext, plain: plain)
        let path = "/" + (keys.first?.sign(signedPath) ?? "insecure") + signedPath
        // The source's own checks, as serve makes them (an http(s) URL, no credentials, no `..`).
        do { _ = try MediaURL.parse(path) } catch { throw ValidationError("\(error)") }
        let url = (origin.hasSuffix("/") ? String(origin.dropLast()) : origin) + path
        if keys.isEmpty {
            FileHandle.writeError(
                "pushmedia: no --url-key: the URL is unsigned, served only for sources under --url-allow-source")
        }
        print(url)
    }
}
