import Locking
import Testing

@Suite("LockedValue")
struct LockedValueTests {
    @Test("increments from many tasks are never lost")
    func serialises() async {
        let counter = LockedValue(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<1_000 { counter.withLock { $0 += 1 } }
                }
            }
        }
        #expect(counter.withLock { $0 } == 8_000)
    }

    @Test("an error thrown inside withLock leaves the lock free")
    func throwingBodyUnlocks() {
        struct Refused: Error {}
        let value = LockedValue(1)
        #expect(throws: Refused.self) { try value.withLock { _ throws(Refused) in throw Refused() } }
        #expect(value.withLock { $0 } == 1)
    }

    #if DEBUG
    /// A debug build's error-checking mutex reports a thread taking the lock it holds (which a
    /// default mutex would answer by hanging forever), and the checked return code stops the process.
    @Test("taking the lock twice on one thread stops the process in a debug build")
    func relockStops() async {
        await #expect(processExitsWith: .failure) {
            let value = LockedValue(0)
            value.withLock { _ in value.withLock { _ in } }
        }
    }
    #endif
}
