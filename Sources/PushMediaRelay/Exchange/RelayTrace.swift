import NIOCore
import NIOHPACK
import PushMedia
import Tracing

/// The spans of a relayed push, when the server traces (`--otel-endpoint`): one server span per
/// push, joined to the sender's trace by its W3C `traceparent`, with the relay, the app, the
/// topic, the push type and the priority; the pipeline's spans for its media under it; and a
/// client span for the exchange with Apple or Google, whose event `dequeued` marks when the push
/// left its app's fair queue, with the status and the `apns-id` or FCM message name. Never the
/// path (an APNs path ends in the device token), an authorization header, a key or a body.
enum RelayTrace {
    /// A relay's span names (`apns push`, `apns upstream`), made once.
    struct Names {
        let relay: String
        let push: String
        let upstream: String

        init(relay: String) {
            self.relay = relay
            push = "\(relay) push"
            upstream = "\(relay) upstream"
        }
    }

    /// The push's span when `sampler` traces it, a child of the sender's span when its headers
    /// carry one.
    static func push(_ exchange: RelayExchange, names: Names, sampler: TraceSampler) -> (any Span)? {
        guard let span = sampler.start(names.push, ofKind: .server, from: exchange.headers, using: HPACKFields())
        else { return nil }
        if span.isRecording {
            span.editAttributes { attributes in
                attributes["pushmedia.relay"] = names.relay
                attributes["http.request.method"] = exchange.method
            }
        }
        return span
    }

    /// What the push's route says of it.
    static func routed(_ span: any Span, _ exchange: RelayExchange, app: String, priority: Int) {
        guard span.isRecording else { return }
        span.editAttributes { attributes in
            attributes["pushmedia.app"] = app
            attributes["pushmedia.priority_class"] = priority
            if let topic = exchange.headers.first(name: "apns-topic") { attributes["apns.topic"] = topic }
            if let type = exchange.headers.first(name: "apns-push-type") { attributes["apns.push_type"] = type }
            if let priority = exchange.headers.first(name: "apns-priority") { attributes["apns.priority"] = priority }
        }
    }

    /// The exchange with the upstream, from the moment the push is queued for it.
    static func upstream(under push: any Span, names: Names) -> (any Span)? {
        PipelineTrace.child(names.upstream, of: push, ofKind: .client)
    }

    /// The upstream's answer on its span, which ends.
    static func answered(_ span: any Span, _ result: Result<UpstreamAnswer, any Error>) {
        defer { span.end() }
        switch result {
        case let .success(answer):
            var name: String?
            if answer.status == 200, var body = answer.body, body.readableBytes < 4096,
                let bytes = body.readBytes(length: body.readableBytes),
                case let .object(message)? = try? JSONValue.parse(bytes), case let .string(text)? = message["name"]
            {
                name = text
            }
            span.editAttributes { attributes in
                attributes["http.response.status_code"] = answer.status
                if let id = answer.headers.first(name: "apns-id") { attributes["apns.id"] = id }
                if let name { attributes["fcm.message_name"] = name }
            }
            if answer.status >= 400 { span.setStatus(SpanStatus(code: .error, message: "HTTP \(answer.status)")) }
        case .failure:
            span.setStatus(SpanStatus(code: .error, message: "no answer from the upstream"))
        }
    }

    /// The relay's answer on the push's span, which ends.
    static func finished(_ span: any Span, _ answer: RelayAnswer, handling: RelayHandling) {
        defer { span.end() }
        guard span.isRecording else { return }
        span.editAttributes { attributes in
            attributes["http.response.status_code"] = answer.status
            attributes["pushmedia.handling"] = handling.rawValue
            if let outcome = answer.outcome, !outcome.isEmpty { attributes["pushmedia.outcome"] = outcome }
        }
        if answer.status >= 500 { span.setStatus(SpanStatus(code: .error, message: "HTTP \(answer.status)")) }
    }
}

/// Reads a propagated context's fields from a request's HPACK headers (lower-case names).
private struct HPACKFields: Extractor {
    func extract(key name: String, from headers: HPACKHeaders) -> String? { headers.first(name: name) }
}
