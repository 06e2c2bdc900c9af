import Foundation
import PushMedia
import _CryptoExtras

/// A Google service account for project `shop-1234` (a fresh RSA key; its token endpoint
/// `tokenURI`), written owner-only as the relays require: the file's path.
public func serviceAccountFile(in directory: TemporaryDirectory, tokenURI: String = "https://oauth.test/token") throws
    -> String
{
    let account = directory.file("sa.json")
    let json = JSONValue.object(
        JSONObject([
            ("type", .string("service_account")), ("project_id", .string("shop-1234")),
            ("private_key", .string(try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)),
            ("client_email", .string("sa@shop-1234.iam.gserviceaccount.com")), ("token_uri", .string(tokenURI)),
        ])
    ).serialized()
    try Data(json).write(to: URL(fileURLWithPath: account))
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: account)
    return account
}
