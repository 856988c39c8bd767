import Locking
import SessionStore
import SheetCore
import Timekeeping

/// Sessions kept in PostgreSQL, the authority shared by every sheetd pointed at the database:
/// this process holds no session state between requests, so any instance serves any session.
///
/// Every operation is a job for one of the committers (`Committer`: a thread and a connection
/// each; a session always goes to the same one), served inside a transaction with the jobs
/// queued beside it (`Batch`), and answered only after that transaction committed. Rows are
/// locked for the change, so changes through different instances apply one after the other.
/// Long-polls and streams wait here for a poke (`Presenters`), which the commit's `NOTIFY`
/// brings from whichever instance made the change (`Listener`).
///
/// libpq blocks, so its calls run only on those threads; a request waits on a continuation,
/// never holding a libmicrohttpd thread or a thread of the Swift cooperative pool.
public final class PostgresStore: SessionStoring {
    public struct Configuration: Sendable {
        /// A libpq connection string or `postgresql://` URI.
        public var url: String
        public var maxSessions = 1_000_000
        public var maxSessionsPerTenant: Int?
        public var sessionTTL: Duration = .seconds(24 * 3600)
        /// Idempotency keys kept in all (cluster-wide), the oldest forgotten first past this.
        public var idempotencyCapacity = 100_000
        /// A key is forgotten this long after it was first used (as in the in-memory store).
        public var keyLifetime: Duration = .seconds(24 * 3600)
        /// Connections (and threads) committing changes; sessions are spread over them by id.
        public var committers = 4
        public var clock = StoreClock.system
        /// The clock the store's timers run on: long-poll deadlines, the idle sweep's pace and
        /// the reconnect backoff (a `ManualClock` in tests, so those rules are checked exactly).
        public var timerClock: any ServiceClock = SystemClock()
        /// Failures no request is waiting to hear about.
        public var report: @Sendable (String) -> Void = { _ in }

        public init(url: String) {
            self.url = url
        }
    }

    public let configuration: Configuration
    let context: StoreContext
    private let committers: [Committer]
    private let listener: Listener
    private let subscriptions = LockedValue<[UInt64: Subscription]>([:])
    private let nextSubscription = LockedValue<UInt64>(0)
    private let tenantGauge = LockedValue<[Tenant: Int]>([:])

    /// Connects, brings the schema up to date (or refuses a newer one), and starts the
    /// committers and the listener. Throws with a message for the operator.
    public static func open(_ configuration: Configuration) throws(ArchiveError) -> PostgresStore {
        do {
            let connection = try PostgresConnection(configuration.url)
            try Schema.migrate(connection)
        } catch let error as PostgresError {
            throw ArchiveError("--database: cannot use PostgreSQL at \(redacted(configuration.url)): \(error.message)")
        } catch {
            throw ArchiveError("--database \(redacted(configuration.url)): \(error)")
        }
        return PostgresStore(configuration)
    }

    private init(_ configuration: Configuration) {
        self.configuration = configuration
        let limits = Batch.Limits(maxSessions: configuration.maxSessions, maxSessionsPerTenant: configuration.maxSessionsPerTenant,
                                  keyLifetimeMilliseconds: Self.milliseconds(configuration.keyLifetime),
                                  touchSlackMilliseconds: min(Self.milliseconds(configuration.sessionTTL) / 100, 60_000))
        let context = StoreContext(url: configuration.url, limits: limits, clock: configuration.clock,
                                   timerClock: configuration.timerClock, report: configuration.report)
        self.context = context
        committers = (0..<max(1, configuration.committers)).map { Committer(index: $0, context: context) }
        listener = Listener(context: context)
    }

    /// The URL without its password, for messages.
    public static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://"), scheme.upperBound < at else { return url }
        let credentials = url[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    private func committer(for id: SessionID) -> Committer { committers[Int(id.low % UInt64(committers.count))] }

    func perform(_ request: Request, on id: SessionID) async -> Reply {
        await committer(for: id).perform(request)
    }

    // MARK: Sessions

    public func create(_ configuration: SheetConfiguration, for tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        try await create(configuration, over: nil, for: tenant)
    }

    /// A session over `parent` takes the parent's routing bits (`SessionID.random(inChainOf:)`),
    /// so a chain's sessions go to one committer, as they go to one shard in memory.
    public func create(_ configuration: SheetConfiguration, over parent: SessionID?, for tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        let id = parent.map { SessionID.random(inChainOf: $0) } ?? SessionID.random()
        let request = Request.create(configuration, over: parent, tenant, id: id, once: nil)
        guard case .snapshot(let snapshot) = try checked(await perform(request, on: id)) else {
            throw Self.unexpected
        }
        return snapshot
    }

    public func create(
        _ configuration: SheetConfiguration, over parent: SessionID? = nil, for tenant: Tenant, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<SessionSnapshot, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let id = parent.map { SessionID.random(inChainOf: $0) } ?? SessionID.random()
        let once = Once(request: idempotency.scoped(to: tenant), render: render)
        let request = Request.create(configuration, over: parent, tenant, id: id, once: once)
        guard case .answer(let answer) = try checked(await perform(request, on: id)) else {
            throw Self.unexpected
        }
        return answer
    }

    public func session(_ id: SessionID, of tenant: Tenant) async throws(StoreError) -> SessionSnapshot {
        guard case .snapshot(let snapshot) = try checked(await perform(.read(id, tenant), on: id)) else { throw Self.unexpected }
        return snapshot
    }

    /// Always nil: every read asks the database.
    public func readInPlace(_ id: SessionID, of tenant: Tenant) -> InPlace<SessionSnapshot>? { nil }

    public func createInPlace(_ configuration: SheetConfiguration, for tenant: Tenant) -> InPlace<SessionSnapshot>? { nil }

    public func apply(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> ActionResult {
        guard case .action(let result) = try checked(await perform(.apply(action, id, tenant, ifMatch: ifMatch, once: nil), on: id)) else {
            throw Self.unexpected
        }
        return result
    }

    /// Always nil: every change is made by the database, in a task.
    public func changeInPlace(_ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) -> InPlace<ActionResult>? {
        nil
    }

    public func apply(
        _ action: SheetAction, to id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?, idempotency: IdempotencyRequest,
        render: @escaping @Sendable (Result<ActionResult, StoreError>) -> StoredAnswer
    ) async throws(StoreError) -> IdempotentAnswer {
        let once = Once(request: idempotency.scoped(to: tenant), render: render)
        guard case .answer(let answer) = try checked(await perform(.apply(action, id, tenant, ifMatch: ifMatch, once: once), on: id)) else {
            throw Self.unexpected
        }
        return answer
    }

    @discardableResult
    public func delete(_ id: SessionID, of tenant: Tenant, ifMatch: AcceptedVersions?) async throws(StoreError) -> DeletedSessions {
        guard case .deleted(let deleted) = try checked(await perform(.delete(id, tenant, ifMatch: ifMatch), on: id)) else {
            throw Self.unexpected
        }
        return deleted
    }

    public func list(of tenant: Tenant, phase: Phase?, after: UInt64, limit: Int) async throws(StoreError) -> SessionPage {
        guard case .page(let page) = try checked(await committers[0].perform(.list(tenant, phase, after: after, limit: limit))) else {
            throw Self.unexpected
        }
        return page
    }

    // MARK: Gauges and housekeeping

    public func phaseCounts() async -> [Phase: Int] {
        guard case .statistics(let phases, let tenants) = await committers[0].perform(.statistics) else { return [:] }
        tenantGauge.withLock { $0 = tenants }
        return phases
    }

    public var sessionsPerTenant: [Tenant: Int] { tenantGauge.withLock { $0 } }

    public var unavailableReason: String? { context.health.reason }

    /// A pass every tenth of the TTL (100 ms to a minute), as the in-memory store does.
    public func runIdleSweeps() async {
        let interval = min(max(configuration.sessionTTL / 10, .milliseconds(100)), .seconds(60))
        let clock = configuration.timerClock
        while true {
            do { try await clock.sleep(until: clock.now + interval) } catch { return }
            await sweep()
        }
    }

    /// Saves the last reads, then removes the sessions idle past the TTL; returns how many this
    /// instance removed.
    @discardableResult
    public func sweep() async -> Int {
        let now = configuration.clock.now().millisecondsSince1970
        var touched = context.touches.withLock { touches in
            defer { touches = [:] }
            return touches
        }
        for id in context.presenters.watchedSessions { touched[id] = now }
        let sweep = Sweep(touched: touched, idleBefore: now - Self.milliseconds(configuration.sessionTTL),
                          keysBefore: now - Self.milliseconds(configuration.keyLifetime),
                          keyCapacity: configuration.idempotencyCapacity)
        switch await committers[0].perform(.sweep(sweep)) {
        case .swept(let removed): return removed.count
        default:
            // Not saved: keep the reads for the next sweep.
            context.touches.withLock { touches in touches.merge(touched) { max($0, $1) } }
            return 0
        }
    }

    public func shutdown() async {
        context.presenters.shutdown()
        let all = subscriptions.withLock { subscriptions in
            defer { subscriptions = [:] }
            return Array(subscriptions.values)
        }
        for subscription in all { subscription.end(.shuttingDown) }
    }

    public func close() async throws(ArchiveError) {
        let touched = context.touches.withLock { $0 }
        if !touched.isEmpty {
            let sweep = Sweep(touched: touched, idleBefore: 0, keysBefore: 0, keyCapacity: Int(Int32.max))
            if case .failed(let error) = await committers[0].perform(.sweep(sweep)) {
                stopThreads()
                throw ArchiveError("the last reads could not be saved: \(Self.reason(of: error))")
            }
        }
        stopThreads()
    }

    private func stopThreads() {
        for committer in committers { committer.close() }
        listener.stop()
    }

    // MARK: Subscriptions

    func register(_ subscription: Subscription) {
        subscriptions.withLock { $0[subscription.token.number] = subscription }
    }

    func forget(_ token: SubscriptionToken) -> Subscription? {
        subscriptions.withLock { $0.removeValue(forKey: token.number) }
    }

    func newToken(for id: SessionID) -> SubscriptionToken {
        SubscriptionToken(session: id, number: nextSubscription.withLock { $0 += 1; return $0 })
    }

    // MARK: Replies

    static let unexpected = StoreError(.unavailable(reason: "the store answered an operation with the reply of another"))

    /// A failure's reason as text, for messages.
    static func reason(of error: StoreError) -> String {
        if case .unavailable(let reason) = error.code.base { return reason }
        return "\(error.code)"
    }

    func checked(_ reply: Reply) throws(StoreError) -> Reply {
        if case .failed(let error) = reply { throw error }
        return reply
    }
}

