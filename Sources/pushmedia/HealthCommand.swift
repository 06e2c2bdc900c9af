import ArgumentParser
import Foundation
import PushMedia
import PushMediaServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `pushmedia health`: whether the hook that `serve` runs with the same settings answers
/// `GET /healthz` with 200. The container image's HEALTHCHECK, in an image without a shell or curl.
struct HealthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Check that the running `serve` answers GET /healthz (for a container's HEALTHCHECK).",
        discussion: """
            Reads the settings `serve` reads (the --config file or PUSHMEDIA_CONFIG's, then the \
            PUSHMEDIA_* environment, then --host and --port) and asks http://HOST:PORT/healthz, where a \
            wildcard host (0.0.0.0, ::) is asked on the loopback address. Exit status: 0 healthy, 1 not \
            (the reason is printed), 64 the settings do not read.
            """
    )

    @Option(help: "Seconds to wait for the answer, connecting included.")
    var timeout: Int = 4
    @Option(name: .customLong("config"), help: "The settings file `serve` was given (default: PUSHMEDIA_CONFIG).")
    var configFile: String?
    @Option(help: "The port `serve` was given with --port (default: the settings').")
    var port: String?
    @Option(help: "The address `serve` was given with --host (default: the settings').")
    var host: String?

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        var server: ServerConfig
        do {
            let file = try (configFile ?? environment["PUSHMEDIA_CONFIG"]).map(SettingsFile.read)
            server = try ServerConfig.fromSources(file: file, environment: environment)
            if let port { try server.set("port", to: port) }
            if let host { try server.set("host", to: host) }
        } catch {
            FileHandle.writeError("pushmedia: \(error)")
            throw Exit.usage
        }
        guard server.port != 0 else {
            FileHandle.writeError("pushmedia: the port is 0 (any free one): there is no port to ask")
            throw Exit.usage
        }
        let host = reachableAddress(of: server.host)
        let url = "http://\(host.contains(":") ? "[\(host)]" : host):\(server.port)/healthz"
        switch HealthProbe.status(host: host, port: server.port, path: "/healthz", timeout: max(1, timeout)) {
        case .success(200):
            print("\(url): healthy")
        case .success(let status):
            FileHandle.writeError("pushmedia: \(url) answered \(status)")
            throw ExitCode(1)
        case .failure(let problem):
            FileHandle.writeError("pushmedia: \(url): \(problem.message)")
            throw ExitCode(1)
        }
    }
}

/// One plain HTTP/1.0 GET on a blocking socket with send and receive timeouts: the status code.
enum HealthProbe {
    struct Problem: Error {
        let message: String
    }

    static func status(host: String, port: Int, path: String, timeout: Int) -> Result<Int, Problem> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            return .failure(Problem(message: "cannot resolve \(host)"))
        }
        defer { freeaddrinfo(found) }
        let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
        guard fd >= 0 else { return .failure(Problem(message: "no socket: \(String(cString: strerror(errno)))")) }
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        // On Linux a blocking connect also gives up after SO_SNDTIMEO.
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            return .failure(Problem(message: "cannot connect: \(String(cString: strerror(errno)))"))
        }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            return .failure(Problem(message: "cannot send the request: \(String(cString: strerror(errno)))"))
        }
        // The status line is all that is read: "HTTP/1.1 200 OK".
        var answer = [UInt8](repeating: 0, count: 64)
        var count = 0
        while count < answer.count {
            let read = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + count, $0.count - count, 0) }
            if read <= 0 { break }
            count += read
            if answer[..<count].contains(UInt8(ascii: "\n")) { break }
        }
        let line = String(decoding: answer[..<count], as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .failure(Problem(message: count == 0 ? "no answer within \(timeout) s" : "not an HTTP answer"))
        }
        return .success(status)
    }
}
