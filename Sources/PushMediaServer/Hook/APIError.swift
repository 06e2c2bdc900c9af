import Foundation
import HTTPTypes
import Hummingbird
import PushMedia

/// An error answer of the HTTP hook: `{"error": {"code", "message"}}` with its status.
public struct APIError: HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    /// Machine-readable, e.g. `invalid_json`, `body_too_large`, `unauthorized`.
    public var code: String
    public var message: String
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var object = JSONObject()
        object["error"] = .object(JSONObject([("code", .string(code)), ("message", .string(message))]))
        var response = Response.json(.object(object), status: status)
        for field in headers { response.headers.append(field) }
        return response
    }
}

extension Response {
    /// A JSON response from already serialized bytes.
    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8", .contentLength: String(bytes.count)],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        var bytes = value.serialized()
        bytes.append(0x0A)
        return json(bytes: bytes, status: status)
    }
}

/// JSON of an `Outcome`, as `process --report` writes it.
func encodeOutcome(_ outcome: Outcome) -> [UInt8] {
    outcome.jsonValue.serialized()
}

/// `{"payload": …, "outcome": …}`.
func resultJSON(_ result: PipelineResult) -> [UInt8] {
    resultJSON(payload: result.bytes, outcome: result.outcome)
}

func resultJSON(payload: [UInt8], outcome: Outcome) -> [UInt8] {
    Array(#"{"payload":"#.utf8) + payload + Array(#","outcome":"#.utf8) + encodeOutcome(outcome) + [UInt8(ascii: "}")]
}
