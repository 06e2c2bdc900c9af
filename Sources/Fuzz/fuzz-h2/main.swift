// libFuzzer target: the relays' HTTP/2 sessions (libnghttp2 through the shim) over arbitrary bytes.
//
// scripts/fuzz.sh builds it with `-sanitize=fuzzer -parse-as-library -D FUZZING`: libFuzzer's
// runtime calls `LLVMFuzzerTestOneInput`. A plain build replays files:
//     swift build --product fuzz-h2 && .build/debug/fuzz-h2 fuzz/corpus/h2 fuzz/crashes/h2
import PushMediaFuzzTargets

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        FuzzTargets.h2(size > 0 ? Array(UnsafeBufferPointer(start: data, count: size)) : [])
        return 0
    }

    // SwiftPM links every executable with `--defsym main=fuzz_h2_main` (the renamed entry point
    // that lets tests link executables), which shadows libFuzzer's own `main`: so this is `main`,
    // and it starts libFuzzer's driver as that `main` would.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @_cdecl("fuzz_h2_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var argc = argc
        var argv = argv
        return runFuzzerDriver(&argc, &argv, fuzz)
    }
#else
    // Replay: runs every file given, and every file under every directory given (`-v` names each).
    // One declaration, no statements: `-parse-as-library` rejects top-level statements even in an
    // inactive `#if` branch, and a global's initializer in main.swift runs at once.
    let replayed = FuzzReplay.main(name: "fuzz-h2", target: FuzzTargets.h2)
#endif
