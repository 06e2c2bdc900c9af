import Foundation
import PushMediaTestSupport
import Testing

@testable import PushMedia

@Suite("SSRF address policy")
struct AddressPolicyTests {
    static func v4(_ text: String) -> [UInt8] { text.split(separator: ".").map { UInt8($0)! } }

    static func v6(_ text: String) -> [UInt8] {
        var address = in6_addr()
        precondition(inet_pton(AF_INET6, text, &address) == 1, text)
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    @Test(
        "internal IPv4 ranges are denied",
        arguments: [
            "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
            "169.254.169.254", "100.64.0.1", "100.127.255.255", "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250",
            "255.255.255.255", "192.0.2.10", "198.18.0.1", "198.51.100.7", "203.0.113.9", "240.0.0.1",
        ])
    func deniesInternalIPv4(_ address: String) {
        #expect(!AddressPolicy.isPublic(Self.v4(address)))
    }

    @Test(
        "public IPv4 addresses are allowed",
        arguments: [
            "93.184.216.34", "8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1",
            "169.253.0.1",
        ])
    func allowsPublicIPv4(_ address: String) {
        #expect(AddressPolicy.isPublic(Self.v4(address)))
    }

    @Test(
        "internal IPv6 ranges and IPv4 hidden in IPv6 are denied",
        arguments: [
            "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
            "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:a9fe:a9fe::1",
            "2001:db8::1", "fec0::1", "2001:0:4136:e378:8000:63bf:80ff:fffe",
        ])
    func deniesInternalIPv6(_ address: String) {
        #expect(!AddressPolicy.isPublic(Self.v6(address)))
    }

    @Test(
        "public IPv6 addresses are allowed",
        arguments: [
            "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:93.184.216.34", "64:ff9b::808:808",
            "2002:5db8:d822::1",
        ])
    func allowsPublicIPv6(_ address: String) {
        #expect(AddressPolicy.isPublic(Self.v6(address)))
    }

    @Test func rejectsMalformedLengths() {
        #expect(!AddressPolicy.isPublic([UInt8]()))
        #expect(!AddressPolicy.isPublic([8, 8, 8]))
    }
}
