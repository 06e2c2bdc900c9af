import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `pushmedia reload`: SIGHUP to the running `serve`, for an image without a shell or `kill`
/// (`kubectl exec deploy/pushmedia -- pushmedia reload`).
struct ReloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Send SIGHUP to the running `serve`: it reads its settings file and relay credentials again.",
        discussion: """
            Signals the process --pid (1: a container's first process), after checking that it is \
            pushmedia. The reload's result is in serve's log. Exit status: 0 sent, 1 not.
            """
    )

    @Option(help: "The process id of `pushmedia serve`.")
    var pid: Int32 = 1

    func run() throws {
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #if os(Linux)
            guard command == "pushmedia" else {
                FileHandle.writeError(
                    "pushmedia: process \(pid) is \(command.map { "'\($0)'" } ?? "not running"), not pushmedia: "
                        + "give serve's process id with --pid")
                throw ExitCode(1)
            }
        #endif
        guard kill(pid, SIGHUP) == 0 else {
            FileHandle.writeError("pushmedia: cannot signal process \(pid): \(String(cString: strerror(errno)))")
            throw ExitCode(1)
        }
        print("sent SIGHUP to pushmedia (process \(pid))")
    }
}
