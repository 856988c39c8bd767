@testable import HTTPServer
import Synchronization
import Testing

@Suite("Shutdown's counter waits")
struct CounterWaitsTests {
    @Test("a wait ends when a change makes its condition hold, long before its deadline")
    func changeWakesTheWaiter() async {
        let waits = CounterWaits()
        let counter = Counter()
        async let met = waits.wait(until: { counter.value.load(ordering: .acquiring) == 0 }, deadline: .now + .seconds(600))
        counter.value.store(0, ordering: .releasing)
        waits.changed()
        #expect(await met)
    }

    @Test("a wait whose condition never holds ends at its deadline with false")
    func deadlineEndsTheWait() async {
        let waits = CounterWaits()
        let counter = Counter()
        #expect(await !waits.wait(until: { counter.value.load(ordering: .acquiring) == 0 }, deadline: .now + .milliseconds(20)))
        waits.changed()   // nothing parked any more: nothing to resume twice
    }

    @Test("a condition that holds already does not wait")
    func holdsAlready() async {
        #expect(await CounterWaits().wait(until: { true }, deadline: .now + .seconds(600)))
    }

    private final class Counter: Sendable {
        let value = Atomic<Int>(1)
    }
}
