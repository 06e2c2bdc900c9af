import ArgumentParser
import Foundation
import PushMediaRelay
import PushMediaServer

struct CheckCredentialsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-credentials",
        abstract: "Check a relay credentials file (--relay-credentials) as serve reads it.",
        discussion: """
            Reads the file and every key, certificate, password and service account it names, with the checks \
            serve makes (permissions, passwords, key types, topics claimed twice). Prints one line per entry \
            and exits 0, or prints each problem and exits 65. Nothing secret is printed.
            """
    )

    @Argument(help: "The credentials file (YAML or JSON).")
    var file: String

    func run() throws {
        do {
            let lines = try CredentialsCheck.summary(of: file, environment: ProcessInfo.processInfo.environment)
            for line in lines { print(line) }
            print("\(file): \(lines.count) entries, valid")
        } catch {
            for problem in error.all { FileHandle.writeError("pushmedia: \(problem)") }
            throw Exit.dataError
        }
    }
}
