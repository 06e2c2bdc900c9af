import ArgumentParser
import Foundation
import Logging
import PushMedia
import PushMediaFleet

struct PurgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Forget the cached results of media URLs, so that the next request fetches them again.",
        discussion: """
            Removes the URL's cache entries from the store's index, for every platform profile. \
            With the nodes' settings (the same PUSHMEDIA_* environment) the entries are found by \
            their keys at once; with other settings, the whole index is read for the entries made \
            from the URL (slower on a large store). Nodes on the same store \
            stop using the entry within --index-cache-ttl (default 60s); with --fleet-db, every \
            node of the fleet drops it from memory at once. The media files stay \
            until `pushmedia gc` finds them unreferenced. For one request, `refresh=1` on \
            /v1/process (or `process --refresh`) revalidates instead. Exit status: 0 done, 1 \
            nothing was cached for a URL (the others are purged), 64 usage error, 74 store error.
            """
    )

    @Argument(help: "Media URLs exactly as payloads give them.")
    var urls: [String]
    @OptionGroup var fleet: FleetOptions
    @OptionGroup var tracing: TracingOptions
    @OptionGroup var options: SharedOptions

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("give at least one URL") }
    }

    func run() async throws {
        var config = try options.config()
        // The fleet's notification in a trace (`pushmedia.fleet.purge`) when the sampler records it.
        let traces = try tracing.commandTracing(configFile: options.configFile)
        do { try config.apply(fleet.given) } catch { throw ValidationError(error.description) }
        // The fleet is checked first: nothing is purged when its nodes could not be told.
        let fleetDatabase: FleetDatabase?
        do {
            fleetDatabase = try FleetDatabase(config: config)
            try await fleetDatabase?.check(logger: Logger(label: "pushmedia"))
        } catch {
            FileHandle.writeError("pushmedia: purge: \(error)")
            throw error.isOutage ? Exit.ioError : Exit.usage
        }
        let pipeline = try await openPipeline(config)
        let purged: [(url: String, keys: [String], searched: Bool)]
        do { purged = try await pipeline.purge(urls: urls) } catch {
            FileHandle.writeError("pushmedia: purge: \(error)")
            throw Exit.ioError
        }
        for (url, keys, searched) in purged {
            let entries = "\(keys.count) cache \(keys.count == 1 ? "entry" : "entries")"
            if keys.isEmpty {
                FileHandle.writeError(
                    "pushmedia: purge: nothing cached for \(url) in \(pipeline.store.location): no entry of the index "
                        + "was made from this URL (give it exactly as payloads give it)")
            } else if searched {
                print(
                    "purged \(url): \(entries) removed from \(pipeline.store.location), made with other settings "
                        + "than these (found by reading the whole index)")
            } else {
                print("purged \(url): \(entries) removed from \(pipeline.store.location)")
            }
        }
        if let fleetDatabase {
            let keys = Array(Set(urls.flatMap(pipeline.cacheKeys(url:)) + purged.flatMap(\.keys)))
            do {
                try await traces.run { try await Fleet.announcePurge(keys, on: fleetDatabase, sampler: traces.sampler) }
            } catch {
                FileHandle.writeError("pushmedia: purge: the fleet's nodes were not told: \(error)")
                throw Exit.ioError
            }
            print("told the fleet's nodes (\(fleetDatabase.described)) to drop the entries from memory")
        }
        // Nothing matched a URL: the caller's settings, or the URL, are not the ones cached.
        if purged.contains(where: { $0.keys.isEmpty }) { throw ExitCode(1) }
    }
}
