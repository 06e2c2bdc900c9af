// libFuzzer's executable for every fuzz target: `fuzz TARGET [libFuzzer's arguments]`, TARGET one
// of FuzzTargets.named (payload, media, bmp, video, h2).
//
// scripts/fuzz.sh builds it with `-sanitize=fuzzer -parse-as-library -D FUZZING`: libFuzzer's
// runtime calls `LLVMFuzzerTestOneInput`. A plain build replays files:
//     swift build --product fuzz && .build/debug/fuzz payload -v fuzz/corpus/payload fuzz/crashes/payload
import Glibc
import PushMediaFuzzTargets

#if FUZZING
    /// The target chosen by the first argument, before libFuzzer starts (and never after).
    nonisolated(unsafe) var chosen: ([UInt8]) -> Void = { _ in }

    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        chosen(size > 0 ? Array(UnsafeBufferPointer(start: data, count: size)) : [])
        return 0
    }

    // SwiftPM links every executable with `--defsym main=fuzz_main` (the renamed entry point that
    // lets tests link executables), which shadows libFuzzer's own `main`: so this is `main`, and
    // it starts libFuzzer's driver as that `main` would, without the target's name.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @_cdecl("fuzz_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        let names = FuzzTargets.named.map(\.key).joined(separator: "|")
        guard argc >= 2, let argv, let name = argv[1], let target = FuzzTargets.target(String(cString: name)) else {
            let usage = "usage: fuzz \(names) [libFuzzer's arguments]\n"
            _ = usage.withCString { write(STDERR_FILENO, $0, strlen($0)) }
            return 64
        }
        chosen = target
        // libFuzzer sees the program's name followed by its own arguments.
        argv[1] = argv[0]
        var count = argc - 1
        var arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv + 1
        return runFuzzerDriver(&count, &arguments, fuzz)
    }
#else
    // Replay: `fuzz TARGET [-v] FILE|DIR...` runs every file given, and every file under every
    // directory given (`-v` names each). One declaration, no statements: `-parse-as-library`
    // rejects top-level statements even in an inactive `#if` branch, and a global's initializer
    // in main.swift runs at once. An unknown target exits 64 (a usage error).
    let replayed: Int = FuzzReplay.main() ?? { () -> Int in exit(64) }()
#endif
