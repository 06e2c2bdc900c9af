import Foundation
import SwiftASN1
import X509

/// What an Apple push certificate says about itself: its topics (the subject's `UID` and Apple's
/// topics extension), the environments it is for, and when it expires. Read from a certificate
/// the relay holds (a credentials entry) and from the certificate a client presents.
struct CertificateIdentity: Sendable, Equatable {
    /// The subject as text (`CN=…,O=…`, `UID=` for the user ID), for per-entry client lists and logs.
    var subject: String
    /// The subject's common name.
    var commonName: String?
    /// The subject's `UID`: the bundle ID of an Apple push certificate.
    var uid: String?
    /// Topics of Apple's extension (1.2.840.113635.100.6.3.6), in order.
    var extensionTopics: [String]
    /// 1.2.840.113635.100.6.3.1 is present.
    var development: Bool
    /// 1.2.840.113635.100.6.3.2 is present.
    var production: Bool
    var notValidAfter: Date

    /// Apple's OIDs.
    static let developmentOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 1]
    static let productionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 2]
    static let topicsOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 6]
    static let uidOID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// Parses a DER certificate.
    init(der: [UInt8]) throws {
        let certificate = try Certificate(derEncoded: der)
        subject = certificate.subject.description.replacingOccurrences(of: "0.9.2342.19200300.100.1.1=", with: "UID=")
        var commonName: String?
        var uid: String?
        for rdn in certificate.subject {
            for attribute in rdn {
                if attribute.type == .RDNAttributeType.commonName { commonName = String(attribute.value) }
                if attribute.type == Self.uidOID { uid = String(attribute.value) ?? Self.anyString(attribute.value) }
            }
        }
        self.commonName = commonName
        self.uid = uid
        development = certificate.extensions[oid: Self.developmentOID] != nil
        production = certificate.extensions[oid: Self.productionOID] != nil
        extensionTopics =
            certificate.extensions[oid: Self.topicsOID].map { Self.topics(inExtension: Array($0.value)) } ?? []
        notValidAfter = certificate.notValidAfter
    }

    /// Every topic the certificate may push to: its `UID` and the extension's topics.
    var topics: Set<String> {
        var all = Set(extensionTopics)
        if let uid { all.insert(uid) }
        return all
    }

    /// Whether this is an Apple push certificate: it names at least one topic.
    var isPushCertificate: Bool { !topics.isEmpty }

    /// Whole days until it expires (negative once expired).
    func daysLeft(now: Date = Date()) -> Int {
        Int((notValidAfter.timeIntervalSince(now) / 86400).rounded(.down))
    }

    /// The topics of Apple's extension: a SEQUENCE of a UTF8String topic followed by a SEQUENCE of
    /// its types (`app`, `voip`, `complication`, …); a SEQUENCE { topic, types } per topic is read too.
    static func topics(inExtension value: [UInt8]) -> [String] {
        guard let root = try? DER.parse(value), case let .constructed(children) = root.content else { return [] }
        var topics: [String] = []
        for child in children {
            if let topic = utf8(child) {
                topics.append(topic)
            } else if case let .constructed(inner) = child.content {
                // { topic, { types } }; a bare { types } follows its topic and names none.
                let pair = Array(inner)
                if pair.count == 2, let topic = utf8(pair[0]), case .constructed = pair[1].content {
                    topics.append(topic)
                }
            }
        }
        return topics
    }

    private static func utf8(_ node: ASN1Node) -> String? {
        guard node.identifier == .utf8String || node.identifier == .printableString || node.identifier == .ia5String,
            case let .primitive(bytes) = node.content
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A `UID` encoded as something other than a directory string.
    private static func anyString(_ value: RelativeDistinguishedName.Attribute.Value) -> String? {
        let text = value.description
        return text.isEmpty ? nil : text
    }
}
