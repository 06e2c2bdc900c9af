import Foundation

/// Downloads of one URL that start while it is being downloaded wait for that download and take
/// a hard link of its file: a payload naming one image for several platforms (an FCM message's
/// Android and iOS parts) costs the origin one fetch, not one per platform. Only plain downloads
/// are shared (not revalidations); a download that ran out of time or was cancelled is not
/// shared: each waiter then fetches for itself, within its own deadline.
final class SharedDownloads: Sendable {
    /// What a waiter gets.
    private enum Outcome: Sendable {
        /// The leader's file (a link of it, removed once every waiter has linked it) and answer.
        case file(path: String, response: FetchResponse, release: @Sendable () -> Void)
        case failed(FetchError)
        /// Fetch yourself.
        case none
    }

    private let waiting = Locked<[String: [CheckedContinuation<Outcome, Never>]]>([:])

    /// Runs `download` (to `path`) unless `url` is being downloaded already; then waits for that
    /// download and links its file to `path`.
    func fetch(
        _ url: String, to path: String, download: @Sendable () async throws(FetchError) -> FetchResponse
    ) async throws(FetchError) -> FetchResponse {
        let leads = waiting.withLock { waiting in
            guard waiting[url] == nil else { return false }
            waiting[url] = []
            return true
        }
        guard leads else { return try await follow(url, to: path, download: download) }
        let response: FetchResponse
        do { response = try await download() } catch {
            let followers = waiting.withLock { $0.removeValue(forKey: url) ?? [] }
            let shared: Outcome = error == .deadlineExceeded || error == .cancelled ? .none : .failed(error)
            for follower in followers { follower.resume(returning: shared) }
            throw error
        }
        let followers = waiting.withLock { $0.removeValue(forKey: url) ?? [] }
        guard !followers.isEmpty else { return response }
        let shared = path + ".shared"
        guard link(path, shared) == 0 else {
            for follower in followers { follower.resume(returning: .none) }
            return response
        }
        let remaining = Locked(followers.count)
        let release: @Sendable () -> Void = {
            if remaining.withLock({
                $0 -= 1
                return $0
            }) == 0 {
                unlink(shared)
            }
        }
        for follower in followers {
            follower.resume(returning: .file(path: shared, response: response, release: release))
        }
        return response
    }

    private func follow(
        _ url: String, to path: String, download: @Sendable () async throws(FetchError) -> FetchResponse
    ) async throws(FetchError) -> FetchResponse {
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let registered = waiting.withLock { waiting in
                guard waiting[url] != nil else { return false }
                waiting[url]!.append(continuation)
                return true
            }
            if !registered { continuation.resume(returning: .none) }
        }
        switch outcome {
        case .none:
            return try await download()
        case let .failed(error):
            throw error
        case let .file(shared, response, release):
            defer { release() }
            unlink(path)
            guard link(shared, path) == 0 else { return try await download() }
            return response
        }
    }
}
