import NIOCore
import PushMediaRelay

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A listener of `serve` that could not bind, in plain words.
public enum ListenFailure {
    /// For a bind that failed (the address in use, or no interface with it): the first of the
    /// hook's, the metrics', the APNs relay's and the FCM relay's addresses this process cannot
    /// bind now, with its flag and the cause; nil for any other error.
    public static func describe(_ error: any Error, server: ServerConfig) -> String? {
        guard let error = error as? IOError, error.errnoCode == EADDRINUSE || error.errnoCode == EADDRNOTAVAIL else {
            return nil
        }
        let listeners: [(flag: String, host: String, port: Int?)] = [
            ("--host/--port", server.host, server.port), ("--metrics-port", server.metricsHost, server.metricsPort),
            ("--apns-port", server.apns.host, server.apns.port), ("--fcm-port", server.fcm.host, server.fcm.port),
        ]
        let why =
            error.errnoCode == EADDRINUSE
            ? "the address is in use (another process listens there)" : "no interface of this machine has the address"
        for (flag, host, port) in listeners {
            guard let port, port != 0, !canBind(host: host, port: port) else { continue }
            return "cannot listen on \(host.contains(":") ? "[\(host)]" : host):\(port) (\(flag)): \(why)"
        }
        return "cannot listen: \(why)"
    }

    /// Whether a TCP socket can bind `host`:`port` now (closed at once).
    static func canBind(host: String, port: Int) -> Bool {
        guard let address = try? SocketAddress(ipAddress: host, port: port) else { return true }
        let descriptor = socket(address.protocol.rawValue, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        return address.withSockAddr { pointer, size in bind(descriptor, pointer, socklen_t(size)) == 0 }
    }
}
