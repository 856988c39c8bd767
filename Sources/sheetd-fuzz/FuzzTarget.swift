import CLibFuzzer
import Dispatch
import Foundation
import SheetFuzzing

// One executable, two builds:
// - ordinary build: `sheetd-fuzz FILE_OR_DIRECTORY...` replays inputs (a crash reproducer, the
//   seed corpus) through the request harness and exits 0 when no invariant broke;
// - fuzz build (.ci/fuzz: `-sanitize=fuzzer,address -D SHEETD_LIBFUZZER`): main hands over to
//   libFuzzer (LLVMFuzzerRunDriver), which takes libFuzzer's usual flags and corpus directories.

/// One harness for the process; each input gets a fresh in-memory store inside `run`.
let harness = RequestHarness()

/// Runs one input to completion. The harness is async; libFuzzer calls in synchronously from its
/// own thread (never a cooperative-pool thread), which waits for the task.
func runInput(_ bytes: [UInt8]) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await harness.run(bytes)
        done.signal()
    }
    done.wait()
}

#if SHEETD_LIBFUZZER
/// libFuzzer's standard entry point (its archive refers to it whichever way it is started).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runInput(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}
#endif

@main
enum FuzzMain {
    static func main() {
        #if SHEETD_LIBFUZZER
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
        #else
        replay(Array(CommandLine.arguments.dropFirst()))
        #endif
    }

    static func replay(_ arguments: [String]) {
        guard !arguments.isEmpty, !arguments.contains("--help") else {
            print("usage: sheetd-fuzz FILE_OR_DIRECTORY...   (replays fuzz inputs through the request harness)")
            exit(arguments.isEmpty ? 2 : 0)
        }
        var files: [String] = []
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("sheetd-fuzz: no such file \(argument)\n".utf8))
                exit(2)
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []
                files += names.sorted().map { "\(argument)/\($0)" }
            } else {
                files.append(argument)
            }
        }
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            runInput(Array(data))
        }
        print("sheetd-fuzz: \(files.count) input(s) replayed, no invariant broken")
    }
}
