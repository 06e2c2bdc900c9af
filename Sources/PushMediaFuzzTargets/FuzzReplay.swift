import Foundation

/// Finds and reads the inputs the replay tools and the regression tests run through the targets.
public enum FuzzReplay {
    /// Every regular file among `paths` and under the directories among them (recursively,
    /// hidden files skipped), in a stable order. Paths that do not exist are skipped.
    public static func files<Paths: Sequence<String>>(_ paths: Paths) -> [String] {
        var found: [String] = []
        let manager = FileManager.default
        for path in paths {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            guard isDirectory.boolValue else {
                found.append(path)
                continue
            }
            let root = path.hasSuffix("/") ? String(path.dropLast()) : path
            let relative = (manager.subpaths(atPath: root) ?? []).sorted()
            for name in relative where !name.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                let file = root + "/" + name
                var nested: ObjCBool = false
                if manager.fileExists(atPath: file, isDirectory: &nested), !nested.boolValue { found.append(file) }
            }
        }
        return found
    }

    /// The bytes of the file at `path` (empty if it cannot be read).
    public static func read(_ path: String) -> [UInt8] {
        FileManager.default.contents(atPath: path).map { Array($0) } ?? []
    }
}

extension FuzzReplay {
    /// The replay tool's main (`fuzz TARGET [-v] FILE|DIR...`): runs the target over the files
    /// named on the command line (`-v` prints each path first) and prints how many ran. Returns
    /// that number, or nil when the target is unknown. `targets` finds a target by its name.
    @discardableResult
    public static func main(
        arguments: [String] = CommandLine.arguments, print: (String) -> Void = { Swift.print($0) },
        targets: (String) -> (([UInt8]) -> Void)? = { FuzzTargets.target($0) }
    ) -> Int? {
        var arguments = Array(arguments.dropFirst())
        let names = FuzzTargets.named.map(\.key).joined(separator: "|")
        guard let name = arguments.first, let target = targets(name) else {
            print("usage: fuzz \(names) [-v] FILE|DIR...   (runs each input through the fuzz target)")
            return nil
        }
        arguments.removeFirst()
        let verbose = arguments.contains("-v")
        arguments.removeAll { $0 == "-v" }
        let inputs = files(arguments)
        for path in inputs {
            if verbose { print(path) }
            target(read(path))
        }
        print("fuzz \(name): replayed \(inputs.count) input(s)")
        return inputs.count
    }
}
