import SheetCore
import Synchronization

/// All sessions of the service. Sessions are spread over several `SessionShard` actors by id,
/// so unrelated sessions never wait for each other; each session has exactly one writer.
public final class SessionStore: Sendable {
    public struct Configuration: Sendable {
        public var maxSessions = 1_000_000
        public var shardCount = 16
        /// Idempotency keys remembered in all, oldest forgotten first past this number.
        public var idempotencyCapacity = 100_000
        /// Sessions nobody has named for this long are removed by the sweep.
        public var sessionTTL: Duration = .seconds(24 * 3600)
        public var clock = StoreClock.system

        public init() {}
    }

    private let shards: [SessionShard]
    private let creations: CreationLedger
    private let count = Atomic<Int>(0)
    private let ordinals = Atomic<UInt64>(0)
    public let configuration: Configuration

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let shardCount = max(1, configuration.shardCount)
        let perShardKeys = max(1, configuration.idempotencyCapacity / shardCount)
        shards = (0..<shardCount).map { _ in
            SessionShard(clock: configuration.clock, idempotencyCapacity: perShardKeys)
        }
        creations = CreationLedger(capacity: configuration.idempotencyCapacity, clock: configuration.clock)
    }

    /// Configurations in use, so sessions created alike share one (immutable) storage object
    /// instead of each holding its own copy of the detent tables: most clients create every
    /// session with the same configuration, and this is most of an idle session's memory.
    private let configurations = Mutex<[SheetConfiguration: SheetConfiguration]>([:])
    private static let internedConfigurationLimit = 4096

    private func interned(_ configuration: SheetConfiguration) -> SheetConfiguration {
        configurations.withLock { table in
            if let shared = table[configuration] { return shared }
            if table.count < Self.internedConfigurationLimit { table[configuration] = configuration }
            return configuration
        }
    }

    private func shard(for id: SessionID) -> SessionShard { shards[id.shardIndex(of: shards.count)] }

    public var sessionCount: Int { count.load(ordering: .relaxed) }

    // MARK: Sessions

    /// Creates a session presented at its default detent, unless `--max-sessions` is reached.
    public func create(_ configuration: SheetConfiguration) async throws(StoreError) -> SessionSnapshot {
        // Reserve a place first, so concurrent creates can never overshoot the limit.
        let limit = self.configuration.maxSessions
        var current = count.load(ordering: .relaxed)
        while true {
            guard current < limit else { throw StoreError(.capacityExceeded(limit: limit)) }
            let (exchanged, original) = count.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
        let id = SessionID.random()
        let ordinal = ordinals.add(1, ordering: .relaxed).newValue
        let sheet = Sheet(configuration: interned(configuration), now: self.configuration.clock.now())
        await shard(for: id).insert(sheet, id: id, ordinal: ordinal)
        return SessionSnapshot(id: id, sheet: sheet)
    }

    /// Creates at most one session per `Idempotency-Key` (global scope); repeats get the first answer.
    public func create(
        _ configuration: SheetConfiguration, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        try await creations.perform(idempotency) {
            do throws(StoreError) { return render(.success(try await self.create(configuration))) } catch { return render(.failure(error)) }
        }
    }

    public func session(_ id: SessionID) async throws(StoreError) -> SessionSnapshot {
        try await shard(for: id).snapshot(id)
    }

    public func apply(_ action: SheetAction, to id: SessionID, ifMatch: UInt64? = nil) async throws(StoreError) -> ActionResult {
        try await shard(for: id).apply(action, to: id, ifMatch: ifMatch)
    }

    public func apply(
        _ action: SheetAction, to id: SessionID, ifMatch: UInt64?, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        try await shard(for: id).apply(action, to: id, ifMatch: ifMatch, idempotency: idempotency, render: render)
    }

    public func delete(_ id: SessionID, ifMatch: UInt64? = nil) async throws(StoreError) {
        try await shard(for: id).delete(id, ifMatch: ifMatch)
        count.subtract(1, ordering: .relaxed)
    }

    /// A page of sessions created after the cursor `after` (a creation ordinal), oldest first.
    /// The cursor is an ordinal, not an id, so it still works after its session was deleted.
    public func list(phase: Phase?, after: UInt64, limit: Int) async -> SessionPage {
        var merged: [(ordinal: UInt64, session: SessionSnapshot)] = []
        // One more than the page from each shard: a shard holding the rest of the page and more
        // must be able to say "more", or `next` would wrongly end the listing.
        for shard in shards {
            merged += await shard.list(phase: phase, after: after, limit: limit + 1)
        }
        merged.sort { $0.ordinal < $1.ordinal }
        let page = merged.prefix(limit)
        let more = merged.count > limit
        return SessionPage(sessions: page.map(\.session), next: more ? page.last?.ordinal : nil)
    }

    // MARK: Events

    public func events(of id: SessionID, after: UInt64) async throws(StoreError) -> EventsPage {
        try await shard(for: id).events(of: id, after: after)
    }

    /// Long-poll: events after `after`, waiting up to `timeout` for the first one.
    public func waitForEvents(of id: SessionID, after: UInt64, timeout: Duration) async throws(StoreError) -> WaitOutcome {
        try await shard(for: id).wait(on: id, after: after, timeout: timeout).get()
    }

    public func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, after: UInt64?) async throws(StoreError) -> SubscriptionToken {
        try await shard(for: id).subscribe(subscriber, to: id, after: after)
    }

    public func unsubscribe(_ token: SubscriptionToken) async {
        await shard(for: token.session).unsubscribe(token)
    }

    // MARK: Housekeeping

    /// One sweep over every shard in small slices (each slice is one short actor turn, so requests
    /// interleave with it). Returns how many idle sessions were removed.
    @discardableResult
    public func sweepIdleSessions(slice: Int = 2048) async -> Int {
        let ttlMilliseconds = Int64(configuration.sessionTTL.components.seconds) * 1000
            + configuration.sessionTTL.components.attoseconds / 1_000_000_000_000_000
        let cutoff = configuration.clock.now().millisecondsSince1970 - ttlMilliseconds
        var removed = 0
        for shard in shards {
            while true {
                let pass = await shard.sweep(idleBefore: cutoff, budget: slice)
                removed += pass.removed
                if pass.finished { break }
            }
        }
        if removed > 0 { count.subtract(removed, ordering: .relaxed) }
        await creations.expire()
        return removed
    }

    /// Sessions per phase, for the metrics gauge.
    public func phaseCounts() async -> [Phase: Int] {
        var total: [Phase: Int] = [:]
        for shard in shards {
            for (phase, value) in await shard.phaseCounts { total[phase, default: 0] += value }
        }
        return total
    }

    /// Releases every long-poll and stream, and refuses new ones; actions still go through.
    public func shutdown() async {
        for shard in shards { await shard.shutdown() }
    }
}

/// The global ledger of `POST /sessions` idempotency keys. A key being served is marked pending,
/// so a concurrent retry waits for the first answer instead of creating a second session.
actor CreationLedger {
    private var ledger: IdempotencyLedger
    private var pending: [String: [CheckedContinuation<Void, Never>]] = [:]
    private let clock: StoreClock

    init(capacity: Int, clock: StoreClock) {
        self.ledger = IdempotencyLedger(capacity: capacity)
        self.clock = clock
    }

    func perform(
        _ request: IdempotencyRequest, create: @Sendable () async -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let key = IdempotencyLedger.Key(scope: nil, key: request.key)
        while pending[request.key] != nil {
            await withCheckedContinuation { pending[request.key, default: []].append($0) }
        }
        switch ledger.lookup(key, fingerprint: request.fingerprint, now: clock.now()) {
        case .replay(let answer): return IdempotentAnswer(answer: answer, replayed: true)
        case .reused: throw StoreError(.idempotencyKeyReused)
        case .miss: break
        }
        pending[request.key] = []
        let answer = await create()
        if answer.status < 500 {
            ledger.store(answer, for: key, fingerprint: request.fingerprint, now: clock.now())
        }
        for waiter in pending.removeValue(forKey: request.key) ?? [] { waiter.resume() }
        return IdempotentAnswer(answer: answer, replayed: false)
    }

    func expire() { ledger.expire(now: clock.now()) }
}
