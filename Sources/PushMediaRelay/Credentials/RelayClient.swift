import NIOCore
import NIOSSL

/// The identity of a relay client that presented a TLS certificate.
struct RelayClient: Sendable {
    /// The certificate's subject (`CN=…,O=…`) and common name.
    var subject: String
    var commonName: String?
    /// The topics of an Apple push certificate (empty for any other certificate).
    var appleTopics: Set<String>

    /// The client of a TLS connection, when it presented a certificate.
    static func of(_ context: ChannelHandlerContext) -> RelayClient? {
        guard let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let certificate = handler.peerCertificate, let der = try? certificate.toDERBytes(),
            let identity = try? CertificateIdentity(der: der)
        else { return nil }
        return RelayClient(subject: identity.subject, commonName: identity.commonName, appleTopics: identity.topics)
    }

    /// Whether an entry's `clients` list lets this client use it (an empty list lets anyone).
    static func allowed(_ client: RelayClient?, by clients: [String]) -> Bool {
        guard !clients.isEmpty else { return true }
        guard let client else { return false }
        return clients.contains(client.subject) || client.commonName.map(clients.contains) == true
    }
}
