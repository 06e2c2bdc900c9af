import Crypto
import Foundation
import PushMedia

/// Apple's provider tokens: ES256 JWTs with header `{"alg":"ES256","kid":…}` and claims
/// `{"iss":<team id>,"iat":<seconds>}`.
enum ProviderToken {
    /// The team (`iss`) of a client's `authorization: bearer <JWT>`, read without verifying the
    /// signature (Apple verifies it): it picks the connection pool and is checked against
    /// `--apns-allow-team`. Nil when the header is not a bearer JWT with a string `iss`.
    static func team(ofAuthorization header: String) -> String? {
        guard header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        let parts = header.dropFirst(7).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let claims = Base64URL.decode(parts[1]),
            let object = try? JSONValue.parse(claims).objectValue,
            case let .string(team)? = object["iss"], !team.isEmpty, team.utf8.count <= 64
        else { return nil }
        return team
    }
}

/// Signs the relay's own provider tokens (`--apns-key`), reusing one for `lifetime`: Apple answers
/// 429 `TooManyProviderTokenUpdates` to refreshes faster than every 20 minutes and 403
/// `ExpiredProviderToken` to tokens older than 60.
final class ProviderTokenSigner: Sendable {
    let keyID: String
    let teamID: String
    /// How long one token is used: 40 minutes.
    let lifetime: Duration
    /// The key's raw scalar (the key type itself is not `Sendable`).
    private let key: Data
    private let current = Locked<(token: String, issued: ContinuousClock.Instant)?>(nil)

    /// A key read by `CredentialFiles.providerKey`: its raw P-256 scalar.
    init(key: Data, keyID: String, teamID: String, lifetime: Duration = .seconds(40 * 60)) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.lifetime = lifetime
    }

    /// The `authorization` header value to send now.
    func authorization(now: ContinuousClock.Instant = .now) -> String {
        current.withLock { current in
            if let (token, issued) = current, now - issued < lifetime { return "bearer " + token }
            let token = sign(issuedAt: Int(Date().timeIntervalSince1970))
            current = (token, now)
            return "bearer " + token
        }
    }

    /// A new token issued at `issuedAt` (Unix seconds).
    func sign(issuedAt: Int) -> String {
        let header = #"{"alg":"ES256","kid":"# + JSONValue.string(keyID).serialized().string + "}"
        let claims = #"{"iss":"# + JSONValue.string(teamID).serialized().string + #","iat":\#(issuedAt)}"#
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        // Raw r‖s, 64 bytes: the JWS form of an ES256 signature.
        let signature =
            (try? P256.Signing.PrivateKey(rawRepresentation: key).signature(for: Array(input.utf8)).rawRepresentation)
            ?? Data()
        return input + "." + Base64URL.encode(Array(signature))
    }
}

/// Base64 with the URL alphabet and no padding (RFC 7515).
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: Substring) -> [UInt8]? {
        guard text.utf8.count <= 8192 else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map { Array($0) }
    }
}

extension [UInt8] {
    fileprivate var string: String { String(decoding: self, as: UTF8.self) }
}
