import Logging
import NIOHPACK
import NIOSSL

/// How one push is authenticated upstream.
enum APNsCredentialChoice {
    /// With a held credential, on its pool (a use taken); `topic` when the relay chose the topic
    /// (a certificate sender's single-topic certificate, no `apns-topic`).
    case held(APNsPool, topic: String?)
    /// With the client's own `authorization`, on its team's connection.
    case passThrough
    /// Answered by the relay in Apple's shape.
    case refused(status: Int, reason: String)
}

extension APNsPolicy {
    /// Chooses the credential by `apns-topic` (a topic with Apple's `.voip`, `.complication`, …
    /// suffix goes with its app): a held one when an entry covers the topic and this client may
    /// use it; else pass-through when allowed; else Apple's answer to a push it cannot
    /// authenticate. A client presenting an Apple push certificate (`--apns-client-ca` naming
    /// Apple's WWDR CA) may push to its certificate's topics only, as Apple allows.
    func credential(_ fields: Fields, client: RelayClient?) -> APNsCredentialChoice {
        var topic = fields.topic
        var chosen: String?
        if let topics = client?.appleTopics, !topics.isEmpty {
            if topic == nil {
                guard topics.count == 1, let only = topics.first else {
                    return .refused(status: 400, reason: "MissingTopic")
                }
                topic = only
                chosen = only
            }
            guard let topic, topics.contains(topic) else { return .refused(status: 400, reason: "TopicDisallowed") }
        }
        if let pool = credentials.apnsPool(forTopic: topic ?? "") {
            guard RelayClient.allowed(client, by: pool.credential.clients) else {
                pool.release(counted: false)
                return .refused(status: 403, reason: "Forbidden")
            }
            if pool.expired() {
                pool.release(counted: false)
                if pool.shouldLogExpiry() {
                    logger.error(
                        "apns certificate expired: its pushes are refused until it is replaced",
                        metadata: [
                            "credential": "\(pool.credential.name)",
                            "not_after": "\(pool.credential.certificate.map { "\($0.notValidAfter)" } ?? "")",
                        ])
                }
                return .refused(status: 403, reason: "BadCertificate")
            }
            return .held(pool, topic: chosen)
        }
        guard credentials.passThrough else {
            return fields.authorization == nil
                ? .refused(status: 403, reason: "MissingProviderToken")
                : .refused(status: 400, reason: "TopicDisallowed")
        }
        guard teamAllowed(fields) else { return .refused(status: 403, reason: "InvalidProviderToken") }
        return .passThrough
    }
}
