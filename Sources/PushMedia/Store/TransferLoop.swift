import CPushMediaShim
import Foundation

/// One thread driving libcurl's multi interface: the object-store transfers whose answers stream
/// to clients (`ObjectStream`). A transfer whose reader is behind is paused, not blocked, so any
/// number of them share the thread, and nothing in the process ever waits for a thread of this
/// loop: a reader suspends until bytes arrive, and the loop never waits for a reader. Built once
/// per process (`ProcessResources.storeStreams`); the thread starts with the first transfer.
///
/// The loop owns each transfer's easy handle and header list from the moment it adds it to the
/// moment it removes it, and frees both there, once.
public final class TransferLoop: @unchecked Sendable {
    /// Connections open to the store at once; transfers past that wait in libcurl's queue until
    /// their reader's deadline (`ObjectStream.head(within:)`).
    public let maxConnections: Int
    private let name: String
    private let multi: UnsafeMutableRawPointer
    private let lock = NSLock()
    /// Guarded by `lock`: what the loop's thread is asked to do next.
    private var commands: [Command] = []
    private var started = false

    enum Command {
        case add(ObjectStream)
        case resume(ObjectStream)
        case remove(ObjectStream)
    }

    /// An easy handle in the multi handle, with what it owns. Touched by the loop's thread only.
    private struct Running {
        let stream: ObjectStream
        let handle: UnsafeMutableRawPointer
        let headers: UnsafeMutablePointer<curl_slist>?
    }

    public init(name: String, maxConnections: Int) {
        _ = Curl.ready
        self.name = name
        self.maxConnections = max(1, maxConnections)
        multi = curl_multi_init()
        _ = pm_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, self.maxConnections)
        _ = pm_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, self.maxConnections)
    }

    /// Starts `stream`'s transfer.
    func start(_ stream: ObjectStream) { submit(.add(stream)) }
    /// Resumes `stream`'s paused transfer (its reader caught up).
    func resume(_ stream: ObjectStream) { submit(.resume(stream)) }
    /// Ends `stream`'s transfer, if it is still running (its reader went away or gave up).
    func remove(_ stream: ObjectStream) { submit(.remove(stream)) }

    private func submit(_ command: Command) {
        lock.lock()
        commands.append(command)
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = name
            thread.stackSize = 1 << 20
            thread.start()
        }
        lock.unlock()
        curl_multi_wakeup(multi)
    }

    private func run() {
        var running: [ObjectIdentifier: Running] = [:]
        var byHandle: [UnsafeMutableRawPointer: ObjectIdentifier] = [:]
        func end(_ id: ObjectIdentifier, result: CURLcode) {
            guard let transfer = running.removeValue(forKey: id) else { return }
            byHandle[transfer.handle] = nil
            curl_multi_remove_handle(multi, transfer.handle)
            curl_easy_cleanup(transfer.handle)
            curl_slist_free_all(transfer.headers)
            transfer.stream.ended(result)
        }
        while true {
            lock.lock()
            let pending = commands
            commands.removeAll(keepingCapacity: true)
            lock.unlock()
            for command in pending {
                switch command {
                case let .add(stream):
                    guard let handle = curl_easy_init() else {
                        stream.ended(CURLE_OUT_OF_MEMORY)
                        continue
                    }
                    let (code, headers) = stream.prepare(handle)
                    guard code == CURLE_OK, curl_multi_add_handle(multi, handle) == CURLM_OK else {
                        curl_easy_cleanup(handle)
                        curl_slist_free_all(headers)
                        stream.ended(code == CURLE_OK ? CURLE_FAILED_INIT : code)
                        continue
                    }
                    let id = ObjectIdentifier(stream)
                    running[id] = Running(stream: stream, handle: handle, headers: headers)
                    byHandle[handle] = id
                case let .resume(stream):
                    // May call the stream's write callback at once, with what was held back.
                    if let transfer = running[ObjectIdentifier(stream)] { _ = pm_curl_resume(transfer.handle) }
                case let .remove(stream):
                    end(ObjectIdentifier(stream), result: CURLE_ABORTED_BY_CALLBACK)
                }
            }
            var active: Int32 = 0
            curl_multi_perform(multi, &active)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                    let id = byHandle[handle]
                else { continue }
                end(id, result: message.pointee.data.result)
            }
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }
}
