import PushMediaRelay
import ServiceLifecycle

/// The relays' held credentials as a service of `serve`: made once with the server's parts,
/// closed once on graceful shutdown, after the relays that use them have stopped (it is the
/// first of the services, so the last to stop), whichever relays ran.
struct CredentialsService: Service {
    let credentials: RelayCredentials

    func run() async throws {
        try? await gracefulShutdown()
        await credentials.shutdown()
    }
}
