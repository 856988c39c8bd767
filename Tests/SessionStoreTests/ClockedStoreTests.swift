import Locking
import Polling
import SessionStore
import SheetCore
import Testing
import Timekeeping

/// The store's timers on a `Timekeeping.ManualClock`: a long-poll's deadline and the idle
/// sweep's pace, each checked just before and just after its limit, however loaded the machine.
@Suite("The store's timers on a manual clock")
struct ClockedStoreTests {
    /// A store whose timers run on `clock`, and whose timestamps (session use, for the TTL)
    /// follow the same clock.
    static func store(on clock: Timekeeping.ManualClock, ttl: Duration = .seconds(3600), maxSessions: Int = 1000) -> SessionStore {
        var configuration = SessionStore.Configuration()
        configuration.timerClock = clock
        configuration.sessionTTL = ttl
        configuration.maxSessions = maxSessions
        configuration.shardCount = 4
        let start = clock.now
        configuration.clock = StoreClock {
            let (seconds, attoseconds) = (clock.now - start).components
            return Timestamp(millisecondsSince1970: 1_764_422_931_000 + seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        }
        return SessionStore(configuration: configuration)
    }

    static func twoDetents() throws -> SheetConfiguration {
        try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300))
    }

    @Test("a long-poll with nothing new answers 'timed out' when its wait has passed on the store's clock, not before")
    func longPollDeadline() async throws {
        let clock = Timekeeping.ManualClock()
        let store = Self.store(on: clock)
        let created = try await store.create(try Self.twoDetents(), for: .default)
        let answered = LockedValue(false)
        let poll = Task {
            defer { answered.withLock { $0 = true } }
            return try await store.waitForEvents(of: created.id, tenant: .default, after: 1, timeout: .seconds(30))
        }
        #expect(await eventually { clock.sleeperCount == 1 })
        clock.advance(by: .seconds(30) - .milliseconds(1))
        // Nothing was due: the poll's timer still sleeps, and nothing else can answer it.
        #expect(clock.sleeperCount == 1)
        #expect(!answered.withLock { $0 })
        clock.advance(by: .milliseconds(1))
        guard case .timedOut(let version) = try await poll.value else {
            Issue.record("the poll was answered with events")
            return
        }
        #expect(version == 1)
    }

    @Test("an event before the deadline answers the long-poll and stops its timer")
    func longPollAnsweredBeforeTheDeadline() async throws {
        let clock = Timekeeping.ManualClock()
        let store = Self.store(on: clock)
        let created = try await store.create(try Self.twoDetents(), for: .default)
        let poll = Task {
            try await store.waitForEvents(of: created.id, tenant: .default, after: 1, timeout: .seconds(30))
        }
        #expect(await eventually { clock.sleeperCount == 1 })
        clock.advance(by: .seconds(29))
        _ = try await store.apply(.drag(.detent(.medium)), to: created.id, of: .default)
        guard case .events(let page) = try await poll.value else {
            Issue.record("the poll timed out")
            return
        }
        #expect(page.events.map(\.seq) == [2])
        // Its timer was cancelled with the answer: nothing sleeps on the clock any more.
        #expect(await eventually { clock.sleeperCount == 0 })
    }

    @Test("the idle sweep runs every tenth of the TTL on the store's clock and removes a session once its TTL has passed")
    func idleSweepPace() async throws {
        let clock = Timekeeping.ManualClock()
        let store = Self.store(on: clock, ttl: .seconds(60), maxSessions: 2)
        #expect(store.idleSweepInterval == .seconds(6))
        let idle = try await store.create(try Self.twoDetents(), for: .default)
        let busy = try await store.create(try Self.twoDetents(), for: .default)
        let sweeper = Task { await store.runIdleSweeps() }
        defer { sweeper.cancel() }

        // Ten passes, one every 6 s: at 60 s `idle` has been unused exactly the TTL, not more.
        for _ in 1...10 {
            #expect(await eventually { clock.sleeperCount == 1 })   // parked until the next pass
            // A read counts as use (and would not keep a removed session: it is not found).
            _ = try await store.session(busy.id, of: .default)
            clock.advance(by: .seconds(6))
            #expect(await eventually { clock.sleeperCount == 1 })   // the pass is over
            #expect(store.sessionCount == 2)
        }
        clock.advance(by: .seconds(6))
        #expect(await eventually { store.sessionCount == 1 })
        do {
            _ = try await store.session(idle.id, of: .default)
            Issue.record("the idle session is still there")
        } catch {
            #expect(error.code == .sessionNotFound)
        }
        #expect(try await store.session(busy.id, of: .default).id == busy.id)
        // The removed session's place is free again, and only that one.
        let configuration = try Self.twoDetents()
        _ = try await store.create(configuration, for: .default)
        do {
            _ = try await store.create(configuration, for: .default)
            Issue.record("a third session was created past maxSessions 2")
        } catch {
            #expect(error.code == .capacityExceeded(limit: 2))
        }
        sweeper.cancel()
        await sweeper.value
        #expect(clock.sleeperCount == 0)
    }
}
