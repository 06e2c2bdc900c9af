import Foundation

/// Writes all of `bytes` to `fd`, again after an interrupted or partial write. Returns 0, or the
/// `errno` of the failure (`EIO` when the system wrote nothing and reported no error).
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if written > 0 {
            offset += written
        } else if written < 0 && errno == EINTR {
            continue
        } else {
            return written < 0 ? errno : EIO
        }
    }
    return 0
}
