/// The generic media keys: the one list of the top-level keys a payload without a vendor's shape
/// keeps its media URL at. `Vendor.generic` reads them (the first present wins, then the
/// `--media-key`s); finding references and the alert check are `Vendor.slots` and `Vendor.hasAlert`.
///
/// The phone's side has its own copy (`MediaURLLocator.genericKeys` in PushMediaNSE, which cannot
/// depend on this library); a test keeps the two equal.
public enum MediaLocator {
    /// Top-level keys searched in order; the first one present wins. `posterImageURL` (a common
    /// service-extension tutorial's key) is one; other keys need `--media-key`.
    public static let builtInKeys = [
        "media_url", "image_url", "imageUrl", "mediaUrl", "attachment-url", "posterImageURL",
    ]
}
