import Foundation

/// What `pushmedia gc` (and `serve --gc-every`) removes.
public struct RetentionPolicy: Sendable, Equatable {
    /// Cache entries not used for this long are removed (use is written down at most once an hour
    /// per entry and process, so this should be well over an hour).
    public var olderThan: Duration
    /// When set, further entries are removed, least recently used first, until the media the rest
    /// reference take at most this many bytes.
    public var maxBytes: Int64?
    /// Report what would be removed, remove nothing.
    public var dryRun: Bool
    /// Media written this recently are never removed, referenced or not: a job uploads its files
    /// before it writes the entry that references them.
    public var grace: Duration

    public init(
        olderThan: Duration = .seconds(30 * 86_400), maxBytes: Int64? = nil, dryRun: Bool = false,
        grace: Duration = .seconds(3600)
    ) {
        self.olderThan = olderThan
        self.maxBytes = maxBytes
        self.dryRun = dryRun
        self.grace = grace
    }
}

/// What a retention pass found and removed.
public struct RetentionReport: Codable, Sendable, Equatable {
    public var dryRun: Bool
    public var entriesKept = 0
    public var entriesRemoved = 0
    public var mediaKept = 0
    public var mediaRemoved = 0
    public var bytesKept: Int64 = 0
    public var bytesRemoved: Int64 = 0

    enum CodingKeys: String, CodingKey {
        case dryRun = "dry_run"
        case entriesKept = "entries_kept"
        case entriesRemoved = "entries_removed"
        case mediaKept = "media_kept"
        case mediaRemoved = "media_removed"
        case bytesKept = "bytes_kept"
        case bytesRemoved = "bytes_removed"
    }
}

/// What `pushmedia gc --verify` found: files whose content no longer hashes to their name.
public struct VerifyReport: Codable, Sendable, Equatable {
    public var checked = 0
    public var corrupt: [String] = []
    /// Removed (none on a dry run).
    public var removed = 0
    public var bytesRemoved: Int64 = 0

    enum CodingKeys: String, CodingKey {
        case checked, corrupt, removed
        case bytesRemoved = "bytes_removed"
    }
}

extension MediaStore {
    /// Reads every media file again and removes those whose content no longer hashes to their
    /// name (truncated, altered, a bad copy). The cache entries that reference one make it again
    /// on their next hit. A file stored again while the pass runs (its time changed) is kept.
    /// Object-store files are downloaded to the work folder one at a time to be hashed.
    /// Blocking.
    public func verifyMedia(dryRun: Bool) throws(StoreError) -> VerifyReport {
        var report = VerifyReport()
        for file in try backend.list(.media) where Self.isValidName(file.name) {
            let expected = String(file.name.prefix(64))
            let actual: String?
            if let local = localPath(of: file.name) {
                actual = try? Self.sha256(file: local)
            } else {
                let temporary = temporaryPath()
                defer { unlink(temporary) }
                let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw .io(path: temporary, reason: String(cString: strerror(errno))) }
                do {
                    try backend.read(file.name, to: fd)
                    close(fd)
                } catch {
                    close(fd)
                    throw error
                }
                actual = try? Self.sha256(file: temporary)
            }
            guard let actual else { continue }  // gone since the listing
            report.checked += 1
            guard actual != expected else { continue }
            report.corrupt.append(file.name)
            if !dryRun {
                guard let current = try backend.mediaInfo(file.name, deadline: nil), current.modified == file.modified
                else { continue }
                try backend.delete(.media, file.name)
                report.removed += 1
                report.bytesRemoved += file.bytes
            }
        }
        return report
    }

    /// Removes cache entries not used within `policy.olderThan` (and, with `maxBytes`, the least
    /// recently used ones beyond it), then media that no remaining entry references. Safe while
    /// other processes use the same store:
    /// - a file is removed only when no entry references it and it was written before the grace
    ///   period: jobs write their files first, and writing a file renews its time even when it
    ///   existed (local rename, S3 PUT); its time is checked again right before it is removed;
    /// - entries written or marked used while the pass runs (new or changed since its first
    ///   listing) keep their files, whatever the clocks say;
    /// - a writer checks its files after writing an entry and withdraws the entry if one is gone
    ///   (`record`), which covers a file stored again between that last check and the removal;
    /// - work files being written live outside the store's names and are never listed.
    /// Blocking: run on a `BlockingExecutor` or a command's own thread.
    public func collectGarbage(_ policy: RetentionPolicy, now: Date = Date()) throws(StoreError) -> RetentionReport {
        var report = RetentionReport(dryRun: policy.dryRun)
        let cutoff = now.addingTimeInterval(-policy.olderThan.seconds)
        let listed = try backend.list(.index)
        let firstSeen = Dictionary(listed.map { ($0.name, $0.modified) }, uniquingKeysWith: { first, _ in first })

        struct Kept {
            var name: String
            var used: Date
            var files: [String]
        }
        var kept: [Kept] = []
        var doomed: [String] = []
        for info in listed {
            if info.modified < cutoff {
                doomed.append(info.name)
                continue
            }
            switch try readFiles(ofEntry: info.name) {
            case .absent: continue
            case .unusable: doomed.append(info.name)
            case let .files(files): kept.append(Kept(name: info.name, used: info.modified, files: files))
            }
        }

        let media = try backend.list(.media)
        let sizes = Dictionary(media.map { ($0.name, $0.bytes) }, uniquingKeysWith: { first, _ in first })
        var references: [String: Int] = [:]
        for entry in kept { for name in entry.files { references[name, default: 0] += 1 } }
        if let maxBytes = policy.maxBytes {
            var total = references.keys.reduce(Int64(0)) { $0 + (sizes[$1] ?? 0) }
            kept.sort { $0.used < $1.used }
            var dropped = 0
            while total > maxBytes, dropped < kept.count {
                doomed.append(kept[dropped].name)
                for name in kept[dropped].files {
                    references[name, default: 1] -= 1
                    if references[name] == 0 {
                        references[name] = nil
                        total -= sizes[name] ?? 0
                    }
                }
                dropped += 1
            }
            kept.removeFirst(dropped)
        }
        report.entriesKept = kept.count
        report.entriesRemoved = doomed.count
        if !policy.dryRun {
            for name in doomed {
                try backend.delete(.index, name)
                forget(key: String(name.dropLast(".json".count)))
            }
            // Entries that appeared or were used while this pass ran keep their files.
            for info in try backend.list(.index) where firstSeen[info.name] != info.modified {
                if case let .files(files) = try readFiles(ofEntry: info.name) {
                    for name in files { references[name, default: 0] += 1 }
                }
            }
        }

        let graceCutoff = now.addingTimeInterval(-policy.grace.seconds)
        for file in media {
            if references[file.name] != nil || file.modified >= graceCutoff {
                report.mediaKept += 1
                report.bytesKept += file.bytes
                continue
            }
            if !policy.dryRun {
                // Stored again since it was listed (a job is about to reference it): keep it.
                guard let current = try backend.mediaInfo(file.name, deadline: nil) else { continue }
                if current.modified != file.modified {
                    report.mediaKept += 1
                    report.bytesKept += file.bytes
                    continue
                }
                try backend.delete(.media, file.name)
            }
            report.mediaRemoved += 1
            report.bytesRemoved += file.bytes
        }
        return report
    }

    private enum EntryFiles {
        case absent, unusable
        case files([String])
    }

    private func readFiles(ofEntry name: String) throws(StoreError) -> EntryFiles {
        guard let (data, _) = try backend.readEntry(String(name.dropLast(".json".count)), deadline: nil) else {
            return .absent
        }
        guard let entry = try? JSONDecoder().decode(CacheEntry.self, from: Data(data)),
            entry.pipeline == PushMediaVersion.pipeline
        else {
            return .unusable  // unreadable, or written by another pipeline version: never a hit again
        }
        return .files(entry.files.map(\.name))
    }
}
