import Foundation

/// The SSRF rule: which resolved IP addresses PushMedia may connect to.
///
/// Checked by libcurl's open-socket callback on the address of every connection, including every
/// redirect hop, after DNS resolution: a hostname, a decimal or octal IPv4 spelling, or a DNS
/// record pointing inside the network all end up here as bytes. Denied unless
/// `--allow-private-networks`: loopback, RFC 1918, link-local, CGNAT, "this network", benchmark,
/// documentation and reserved IPv4 ranges, multicast, broadcast, the unspecified addresses,
/// IPv6 ULA and link/site-local, and IPv4 hidden in IPv6 (mapped, compatible, NAT64, 6to4,
/// Teredo), which is judged by the embedded IPv4 address.
public enum AddressPolicy {
    /// Whether a connection to `address` on `port` may be made: public addresses always; an
    /// internal one only when `"address:port"` (IPv6 as `"[address]:port"`) is listed in
    /// `trusted` (`--trust-peer`, for an origin that lives inside the network).
    public static func allows(_ address: some Collection<UInt8>, port: Int, trusted: Set<String> = []) -> Bool {
        if isPublic(address) { return true }
        guard !trusted.isEmpty else { return false }
        return trusted.contains(peerName(Array(address), port: port))
    }

    /// Whether every address `host` resolves to may be connected to on `port` (nil when it does
    /// not resolve): what the fetch's rule would say of each, for a redirect that sends a client
    /// there instead. `allowPrivate` allows them all. Blocking (getaddrinfo).
    public static func allowsEvery(host: String, port: Int, allowPrivate: Bool, trusted: Set<String>) -> Bool? {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &found) == 0, let first = found else { return nil }
        defer { freeaddrinfo(first) }
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            cursor = entry.pointee.ai_next
            guard let address = entry.pointee.ai_addr else { continue }
            let bytes: [UInt8]
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }
                }
            case AF_INET6:
                bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                }
            default: continue
            }
            if !allowPrivate && !allows(bytes, port: port, trusted: trusted) { return false }
        }
        return true
    }

    /// `1.2.3.4:80` or `[2001:db8::1]:443`.
    public static func peerName(_ bytes: [UInt8], port: Int) -> String {
        var text = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        guard bytes.count == 4 || bytes.count == 16, inet_ntop(family, bytes, &text, socklen_t(text.count)) != nil
        else { return "?" }
        let host = String(cBuffer: text)
        return bytes.count == 4 ? "\(host):\(port)" : "[\(host)]:\(port)"
    }

    /// Whether a public (internet-routable) peer: 4 or 16 bytes in network order.
    public static func isPublic(_ address: some Collection<UInt8>) -> Bool {
        let bytes = Array(address)
        switch bytes.count {
        case 4: return isPublicIPv4(bytes[0], bytes[1], bytes[2], bytes[3])
        case 16: return isPublicIPv6(bytes)
        default: return false
        }
    }

    static func isPublicIPv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> Bool {
        switch a {
        case 0: return false  // 0.0.0.0/8 "this network"
        case 10: return false  // 10/8 private
        case 100 where (64...127).contains(b): return false  // 100.64/10 CGNAT
        case 127: return false  // 127/8 loopback
        case 169 where b == 254: return false  // 169.254/16 link-local (cloud metadata)
        case 172 where (16...31).contains(b): return false  // 172.16/12 private
        case 192 where b == 0 && c == 0: return false  // 192.0.0/24 IETF protocol assignments
        case 192 where b == 0 && c == 2: return false  // 192.0.2/24 documentation
        case 192 where b == 88 && c == 99: return false  // 192.88.99/24 6to4 relay
        case 192 where b == 168: return false  // 192.168/16 private
        case 198 where b == 18 || b == 19: return false  // 198.18/15 benchmarking
        case 198 where b == 51 && c == 100: return false  // 198.51.100/24 documentation
        case 203 where b == 0 && c == 113: return false  // 203.0.113/24 documentation
        case 224...255: return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    static func isPublicIPv6(_ b: [UInt8]) -> Bool {
        let first10Zero = b[0..<10].allSatisfy { $0 == 0 }
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated); also :: and ::1.
        if first10Zero && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)) {
            return isPublicIPv4(b[12], b[13], b[14], b[15])
        }
        // ::ffff:0:a.b.c.d (IPv4-translated, RFC 2765)
        if b[0..<8].allSatisfy({ $0 == 0 }) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0 {
            return false
        }
        // 64:ff9b::/96 NAT64 well-known prefix and 64:ff9b:1::/48 local-use NAT64
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b {
            if b[4..<12].allSatisfy({ $0 == 0 }) { return isPublicIPv4(b[12], b[13], b[14], b[15]) }
            if b[4] == 0 && b[5] == 1 { return false }
        }
        // 2002::/16 6to4: the IPv4 address sits in bytes 2...5
        if b[0] == 0x20 && b[1] == 0x02 { return isPublicIPv4(b[2], b[3], b[4], b[5]) }
        // 2001::/32 Teredo: the client's IPv4 is the last 4 bytes, inverted
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 {
            return isPublicIPv4(~b[12], ~b[13], ~b[14], ~b[15])
        }
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8 { return false }  // 2001:db8::/32 documentation
        if b[0] & 0xfe == 0xfc { return false }  // fc00::/7 unique local
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return false }  // fe80::/10 link-local
        if b[0] == 0xfe && b[1] & 0xc0 == 0xc0 { return false }  // fec0::/10 site-local (deprecated)
        if b[0] == 0xff { return false }  // ff00::/8 multicast
        if b[0] == 0x01 && b[1..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
        return b[0] & 0xe0 == 0x20  // only 2000::/3 is global unicast
    }
}
