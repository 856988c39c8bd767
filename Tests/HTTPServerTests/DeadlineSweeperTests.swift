@testable import HTTPServer
import Polling
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The deadline sweeper's thread")
struct DeadlineSweeperTests {
    @Test("it sweeps once an interval has passed, again and again, until stopped")
    func sweepsEveryInterval() async {
        let sweeper = DeadlineSweeper()
        let sweeps = Atomic<Int>(0)
        let ended = Atomic<Bool>(false)
        _ = PlainThread.start {
            sweeper.run({ sweeps.add(1, ordering: .relaxed) }, every: .milliseconds(2))
            ended.store(true, ordering: .releasing)
        }
        #expect(await eventually { sweeps.load(ordering: .relaxed) >= 3 })
        sweeper.stop()
        #expect(await eventually { ended.load(ordering: .acquiring) })
    }

    /// Between two sweeps the thread sleeps until the next one is due: a stop wakes it, and
    /// nothing else does (a wake is a voluntary context switch of that thread).
    @Test("between sweeps it sleeps without waking; stop ends the wait at once")
    func sleepsUntilStopped() async throws {
        let sweeper = DeadlineSweeper()
        let sweeps = Atomic<Int>(0)
        let thread = Atomic<Int32>(0)
        let ended = Atomic<Bool>(false)
        _ = PlainThread.start {
            thread.store(Self.currentThreadID(), ordering: .releasing)
            sweeper.run({ sweeps.add(1, ordering: .relaxed) }, every: .seconds(3600))
            ended.store(true, ordering: .releasing)
        }
        #expect(await eventually { thread.load(ordering: .acquiring) != 0 })
        let id = thread.load(ordering: .acquiring)
        // The thread has gone to sleep once it has switched out at least once; count from then.
        let before = try #require(await retried { Self.voluntarySwitches(of: id).flatMap { $0 > 0 ? $0 : nil } })
        // The window watched, not a timeout: on a busy machine it only grows, and a thread
        // blocked until a sweep an hour away does not switch however long it is.
        try await Task.sleep(for: .milliseconds(200))
        let after = try #require(Self.voluntarySwitches(of: id))
        #expect(after - before <= 1, "woke \(after - before) times in 200 ms with an hour to the next sweep")
        sweeper.stop()
        #expect(await eventually { ended.load(ordering: .acquiring) })
        #expect(sweeps.load(ordering: .relaxed) == 0)
    }

    /// The calling thread's id, from /proc/thread-self ("PID/task/TID"); Glibc's module has no `gettid`.
    private static func currentThreadID() -> Int32 {
        var link = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/thread-self", &link, link.count - 1)
        guard length > 0 else { return -1 }
        let text = String(decoding: link.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.split(separator: "/").last.flatMap { Int32($0) } ?? -1
    }

    /// The thread's voluntary context switches, from /proc (Linux).
    private static func voluntarySwitches(of thread: Int32) -> Int? {
        guard let file = fopen("/proc/self/task/\(thread)/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("voluntary_ctxt_switches:") {
                return Int(String(text.filter(\.isNumber)))
            }
        }
        return nil
    }
}
