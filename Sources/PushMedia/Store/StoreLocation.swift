import Foundation

/// What `--store` names.
enum StoreLocation: Equatable {
    case directory(String)
    case s3(bucket: String, prefix: String)

    init(_ text: String) throws(StoreError) {
        guard text.lowercased().hasPrefix("s3://") else {
            self = .directory(text)
            return
        }
        let rest = text.dropFirst(5)
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let bucket = String(parts[0])
        let prefix = parts.count > 1 ? String(parts[1]).trimmingCharacters(in: CharacterSet(charactersIn: "/")) : ""
        guard bucket.count >= 3, bucket.count <= 63,
            bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == ".") })
        else {
            throw .invalidLocation(
                "\"\(text)\": a bucket name has 3 to 63 lowercase letters, digits, dots and hyphens"
                    + " (s3://BUCKET[/PREFIX])")
        }
        guard prefix.utf8.count <= 512, !prefix.contains("//"),
            !prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
        else {
            throw .invalidLocation("\"\(text)\": the prefix must be a plain path such as pushmedia or prod/push")
        }
        self = .s3(bucket: bucket, prefix: prefix)
    }
}
