import Foundation
import SheetFuzzing
import Testing

/// The libFuzzer target's harness (Sources/SheetFuzzing) in the ordinary test run: the committed
/// seed corpus (Tests/FuzzCorpus, which .ci/fuzz starts from), then a fixed count of seeded
/// mutations of it, so the parsers and invariants are exercised even where libFuzzer is not
/// built. A broken invariant traps: the test process stops with the harness's message.
@Suite("Fuzz corpus and seeded mutations")
struct FuzzCorpusTests {
    static let corpusDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("FuzzCorpus")

    static func corpus() throws -> [[UInt8]] {
        let names = try FileManager.default.contentsOfDirectory(atPath: corpusDirectory.path).sorted()
        return try names.map { Array(try Data(contentsOf: corpusDirectory.appendingPathComponent($0))) }
    }

    @Test func seedCorpusKeepsEveryInvariant() async throws {
        let inputs = try Self.corpus()
        #expect(inputs.count >= 20)
        let harness = RequestHarness()
        for input in inputs {
            await harness.run(input)
            await Task.yield()
        }
    }

    /// `SHEETD_FUZZ_MUTATIONS` runs more (the default keeps this test near a second).
    @Test func seededMutationsKeepEveryInvariant() async throws {
        let count = ProcessInfo.processInfo.environment["SHEETD_FUZZ_MUTATIONS"].flatMap { Int($0) } ?? 1000
        let inputs = try Self.corpus()
        var random = SeededGenerator(seed: 0xF022_0007)
        let harness = RequestHarness()
        for _ in 0..<count {
            var input = inputs[Int.random(in: 0..<inputs.count, using: &random)]
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                switch Int.random(in: 0...5, using: &random) {
                case 0 where !input.isEmpty:
                    input[Int.random(in: 0..<input.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                case 1:
                    let interesting: [UInt8] = [0x00, 0x0A, 0x22, 0x25, 0x3A, 0x5C, 0x7B, 0x7D, 0x80, 0xC3, 0xFF, 0x24, 0x30, 0x31]
                    input.insert(interesting[Int.random(in: 0..<interesting.count, using: &random)], at: Int.random(in: 0...input.count, using: &random))
                case 2 where !input.isEmpty:
                    input.remove(at: Int.random(in: 0..<input.count, using: &random))
                case 3:
                    // Splice in a piece of another input (a header, a body, a request).
                    let other = inputs[Int.random(in: 0..<inputs.count, using: &random)]
                    guard !other.isEmpty else { break }
                    let start = Int.random(in: 0..<other.count, using: &random)
                    let end = Int.random(in: start...min(other.count, start + 80), using: &random)
                    input.insert(contentsOf: other[start..<end], at: Int.random(in: 0...input.count, using: &random))
                case 4 where input.count > 1:
                    input.removeLast(Int.random(in: 1...input.count / 2 + 1, using: &random))
                default:
                    input += Array("\n%%\nPOST /sessions/$1/drag\nIdempotency-Key: m\n\n{\"to\":\"medium\"}".utf8)
                }
            }
            await harness.run(input)
            // CPU-bound on the cooperative pool (two threads here): let the in-process servers
            // of other suites have their turns between inputs.
            await Task.yield()
        }
    }
}
