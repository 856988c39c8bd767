import Dispatch
import Foundation
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

    @Test("withLockIfFree does not run while another thread holds the lock, and runs once it is free")
    func withLockIfFreeRefusesAHeldLock() {
        let value = LockedValue(1)
        let seen = LockedValue<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        value.withLock { _ in
            // The other thread only tries the lock, so waiting for it here cannot deadlock.
            Thread {
                seen.withLock { $0 = value.withLockIfFree { $0 += 1; return $0 } }
                done.signal()
            }.start()
            done.wait()
        }
        #expect(seen.withLock { $0 } == nil)
        #expect(value.withLockIfFree { $0 += 1; return $0 } == 2)
        #expect(value.withLock { $0 } == 2)
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
