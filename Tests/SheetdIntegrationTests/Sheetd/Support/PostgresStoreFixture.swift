import Locking
import Polling
import PostgresStore
import SessionStore
import SheetCore
import Synchronization

/// A private PostgreSQL and the `PostgresStore`s a test opens on it (two of them play two
/// sheetd instances sharing the database). The clock is the test's: it starts at the real time
/// and moves only when the test advances it.
final class PostgresStoreFixture: Sendable {
    let server: PostgresServer
    private let offset = Atomic<Int64>(0)
    let start: Int64

    init() async throws {
        server = try await offPool { try PostgresServer() }
        start = StoreClock.system.now().millisecondsSince1970
    }

    var clock: StoreClock {
        StoreClock { [self] in Timestamp(millisecondsSince1970: start + offset.load(ordering: .relaxed)) }
    }

    func advance(by duration: Duration) {
        offset.add(duration.components.seconds * 1000, ordering: .relaxed)
    }

    func configuration(_ change: (inout PostgresStore.Configuration) -> Void = { _ in }) -> PostgresStore.Configuration {
        var configuration = PostgresStore.Configuration(url: server.url)
        configuration.clock = clock
        configuration.committers = 2
        change(&configuration)
        return configuration
    }

    func open(_ change: (inout PostgresStore.Configuration) -> Void = { _ in }) async throws -> PostgresStore {
        let configuration = configuration(change)
        return try await offPool { try PostgresStore.open(configuration) }
    }

    static let twoDetents = try! SheetConfiguration(detents: [.medium, .large])
}

/// An `Idempotency-Key` request as the API makes one.
func idempotency(_ key: String, path: String, body: String) -> IdempotencyRequest {
    IdempotencyRequest(key: key, method: "POST", path: path, body: Array(body.utf8))
}

/// What the API would store as the answer: enough to tell answers apart.
@Sendable func renderAction(_ result: Result<ActionResult, StoreError>) -> StoredAnswer {
    switch result {
    case .success(let done): StoredAnswer(status: 200, headers: ["ETag": "\"\(done.session.sheet.version)\""], body: Array("v\(done.session.sheet.version)".utf8))
    case .failure(let error): StoredAnswer(status: error.code == .versionMismatch ? 412 : 409, headers: [:], body: Array("\(error.code)".utf8))
    }
}

@Sendable func renderCreate(_ result: Result<SessionSnapshot, StoreError>) -> StoredAnswer {
    switch result {
    case .success(let snapshot): StoredAnswer(status: 201, headers: ["Location": "/sessions/\(snapshot.id)"], body: Array(snapshot.id.description.utf8))
    case .failure: StoredAnswer(status: 503, headers: [:], body: [])
    }
}

/// The store error an operation threw, or nil when it succeeded.
func storeError(_ body: () async throws(StoreError) -> Void) async -> StoreError? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

/// A stream's subscriber that keeps what it receives, for a test to wait on.
final class EventCollector: EventSubscriber {
    private struct State {
        var seqs: [UInt64] = []
        var end: SubscriptionEnd?
    }

    private let state = LockedValue(State())

    func receive(_ events: [SheetEvent]) -> Bool {
        state.withLock { $0.seqs += events.map(\.seq) }
        return true
    }

    func ended(_ reason: SubscriptionEnd) {
        state.withLock { $0.end = reason }
    }

    /// The seqs received once `seq` is among them; what was received when `timeout` passed
    /// otherwise (the timeout only ends a failing test).
    func waitFor(seq: UInt64, timeout: Duration) async -> [UInt64] {
        await waitUntil(timeout: timeout) { $0.seqs.contains(seq) }.seqs
    }

    func waitForEnd(timeout: Duration) async -> SubscriptionEnd? {
        await waitUntil(timeout: timeout) { $0.end != nil }.end
    }

    private func waitUntil(timeout: Duration, _ done: (State) -> Bool) async -> State {
        await retried(within: timeout, every: .milliseconds(5)) { () -> State? in
            let now = state.withLock { $0 }
            return done(now) ? now : nil
        } ?? state.withLock { $0 }
    }
}
