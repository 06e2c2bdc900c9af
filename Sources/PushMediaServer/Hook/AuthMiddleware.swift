import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PushMedia

/// Guards `/v1/*` (and `/metrics` beside it): a bearer token from the configured list
/// (constant-time comparison), or a request signed with the shared secret:
/// `X-PushMedia-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, at most
/// `tolerance` away from now. With neither configured, everything passes.
struct AuthMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The tokens and secret in force (a reload may change them).
    let live: LiveSettings
    let tolerance: TimeInterval
    let bodyLimit: Int
    let now: @Sendable () -> Date

    init(
        live: LiveSettings, bodyLimit: Int, tolerance: TimeInterval = 300,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.live = live
        self.tolerance = tolerance
        self.bodyLimit = bodyLimit
        self.now = now
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let current = live.current
        let (tokenDigests, secret) = (current.tokenDigests, current.secret)
        guard !tokenDigests.isEmpty || secret != nil else { return try await next(request, context) }
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") {
            let presented = SHA256.hash(
                data: Data(authorization.dropFirst(7).trimmingCharacters(in: .whitespaces).utf8))
            // Compare fixed-length digests, every one of them, without stopping early.
            var matched = false
            for digest in tokenDigests { matched = Self.constantTimeEqual(digest, Array(presented)) || matched }
            if matched { return try await next(request, context) }
            throw Self.unauthorized("the bearer token is not valid")
        }
        if let signature = request.headers[.pushMediaSignature] {
            guard let secret else { throw Self.unauthorized("signed requests are not enabled on this server") }
            var request = request
            let body: ByteBuffer
            do { body = try await request.collectBody(upTo: bodyLimit) } catch {
                throw APIError(.contentTooLarge, code: "body_too_large", message: "the body exceeds \(bodyLimit) bytes")
            }
            try verify(signature, body: Array(body.readableBytesView), key: SymmetricKey(data: secret))
            return try await next(request, context)
        }
        throw Self.unauthorized("send Authorization: Bearer <token> or X-PushMedia-Signature")
    }

    /// Checks `t=…,v1=…` against the body.
    func verify(_ header: String, body: [UInt8], key: SymmetricKey) throws {
        var timestamp: String?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = pair[1] } else if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, let seconds = TimeInterval(timestamp), !signatures.isEmpty else {
            throw Self.unauthorized("X-PushMedia-Signature must be t=<unix seconds>,v1=<hex HMAC-SHA256>")
        }
        guard abs(now().timeIntervalSince1970 - seconds) <= tolerance else {
            throw Self.unauthorized(
                "the signature's timestamp is more than \(Int(tolerance)) s from the server's clock")
        }
        let message = Array(timestamp.utf8) + [UInt8(ascii: ".")] + body
        for signature in signatures {
            if let mac = Self.hexBytes(signature),
                HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: message, using: key)
            {
                return
            }
        }
        throw Self.unauthorized("the signature does not match the body")
    }

    static func unauthorized(_ message: String) -> APIError {
        var error = APIError(.unauthorized, code: "unauthorized", message: message)
        error.headers[.wwwAuthenticate] = "Bearer"
        return error
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, digits.count <= 128 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
