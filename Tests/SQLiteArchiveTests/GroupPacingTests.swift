@testable import SQLiteArchive
import Testing

/// The writer's rule for how many changes a group waits for (`GroupPacing`), on its own.
@Suite("SQLite archive: group pacing")
struct GroupPacingTests {
    @Test("the target after a run of groups", arguments: [
        // A lone client: groups of one never wait.
        ([1, 1, 1, 1], 0),
        // Two clients answered together: wait for both.
        ([2, 2, 2], 2),
        ([1, 2], 2),
        // Under load the largest group of late sets it…
        ([3, 40, 12, 10], 30),
        // …and decays by an eighth with each smaller group, down to what the load brings.
        ([64] + Array(repeating: 10, count: 30), 10),
        // Back to one client: the target decays until nothing waits.
        ([8] + Array(repeating: 1, count: 20), 0),
    ])
    func target(groups: [Int], expected: Int) {
        var pacing = GroupPacing()
        for group in groups { pacing.finished(group: group) }
        #expect(pacing.target == expected)
    }

    @Test("a new pacing does not wait")
    func fresh() {
        #expect(GroupPacing().target == 0)
    }
}
