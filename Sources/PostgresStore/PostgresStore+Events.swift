import Locking
import SessionStore
import SheetCore
import Timekeeping

/// Event readers: pages, long-polls and streams. They read committed events from the database;
/// long-polls and streams wait for a poke between reads, never poll.
extension PostgresStore {
    public func events(of id: SessionID, tenant: Tenant, after: UInt64) async throws(StoreError) -> EventsPage {
        try await page(of: id, tenant: tenant, after: after)
    }

    func page(of id: SessionID, tenant: Tenant, after: UInt64?) async throws(StoreError) -> EventsPage {
        guard case .events(let page) = try checked(await perform(.events(id, tenant, after: after), on: id)) else {
            throw Self.unexpected
        }
        return page
    }

    /// The watch is taken before the first read, so a commit between the read and the wait
    /// still wakes it.
    public func waitForEvents(of id: SessionID, tenant: Tenant, after: UInt64, timeout: Duration) async throws(StoreError) -> WaitOutcome {
        guard let watch = context.presenters.watch(id) else { throw StoreError(.shuttingDown) }
        defer { context.presenters.remove(watch) }
        let clock = context.timerClock
        let deadline = clock.now + timeout
        while true {
            let seen = watch.pokes
            let page = try await page(of: id, tenant: tenant, after: after)
            if !page.events.isEmpty || timeout <= .zero { return .events(page) }
            if clock.now >= deadline { return .timedOut(version: page.version) }
            switch await watch.next(after: seen, until: deadline, on: clock) {
            case .poked: continue
            case .timedOut: return .timedOut(version: page.version)
            case .closed: throw StoreError(.shuttingDown)
            }
        }
    }

    /// The backlog is delivered before the subscription takes pokes; pokes that arrive during
    /// it make the subscription read again right after, so nothing is missed or sent twice.
    public func subscribe(_ subscriber: any EventSubscriber, to id: SessionID, of tenant: Tenant, after: UInt64?) async throws(StoreError) -> SubscriptionToken {
        let subscription = Subscription(token: newToken(for: id), tenant: tenant, subscriber: subscriber, store: self)
        guard let watch = context.presenters.watch(id, onPoke: { [weak subscription] in subscription?.poked() }) else {
            throw StoreError(.shuttingDown)
        }
        subscription.attach(watch)
        let backlog: EventsPage
        do {
            backlog = try await page(of: id, tenant: tenant, after: after)
        } catch {
            context.presenters.remove(watch)
            throw error
        }
        register(subscription)
        subscription.start(with: backlog)
        return subscription.token
    }

    public func unsubscribe(_ token: SubscriptionToken) async {
        forget(token)?.end(nil)
    }

    func removeWatch(_ watch: Watch) {
        context.presenters.remove(watch)
    }
}

/// One stream's subscription: delivers the session's committed events in order, without gaps,
/// reading them from the database after each poke. Only one read-and-deliver runs at a time
/// (`running`); a poke during it sets `again`, so the newest events are always read.
final class Subscription: Sendable {
    private struct State {
        var delivered: UInt64 = 0
        var running = true
        var again = false
        var ended = false
        var watch: Watch?
    }

    let token: SubscriptionToken
    let tenant: Tenant
    private let subscriber: any EventSubscriber
    private let store: PostgresStore
    private let state = LockedValue(State())

    init(token: SubscriptionToken, tenant: Tenant, subscriber: any EventSubscriber, store: PostgresStore) {
        self.token = token
        self.tenant = tenant
        self.subscriber = subscriber
        self.store = store
    }

    func attach(_ watch: Watch) {
        state.withLock { $0.watch = watch }
    }

    func start(with backlog: EventsPage) {
        if !backlog.events.isEmpty, !subscriber.receive(backlog.events) {
            end(nil)
            return
        }
        state.withLock { $0.delivered = backlog.version }
        finishRound()
    }

    func poked() {
        let start = state.withLock { state -> Bool in
            if state.ended { return false }
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        if start { Task { await self.round() } }
    }

    private func round() async {
        let after = state.withLock { $0.delivered }
        do {
            var page: EventsPage
            do {
                page = try await store.page(of: token.session, tenant: tenant, after: after)
            } catch where error.code == .eventsExpired {
                // Fallen behind the retained events: go on from the oldest still kept, as the
                // in-memory store does.
                let now = try await store.page(of: token.session, tenant: tenant, after: nil)
                page = try await store.page(of: token.session, tenant: tenant,
                                            after: now.version - min(now.version, UInt64(Sheet.retainedEvents)))
            }
            if !page.events.isEmpty, !subscriber.receive(page.events) {
                end(nil)
                return
            }
            state.withLock { $0.delivered = max($0.delivered, page.version) }
        } catch where error.code == .sessionNotFound {
            end(.sessionDeleted)
            return
        } catch {
            // The database is away: stop here; the reconnect pokes every watch again.
            state.withLock { $0.running = false }
            return
        }
        finishRound()
    }

    private func finishRound() {
        let again = state.withLock { state -> Bool in
            if state.again, !state.ended {
                state.again = false
                return true
            }
            state.running = false
            return false
        }
        if again { Task { await self.round() } }
    }

    /// Ends the subscription (telling the subscriber why, when the store ended it).
    func end(_ reason: SubscriptionEnd?) {
        let (watch, first) = state.withLock { state in
            defer { state.ended = true }
            return (state.watch, !state.ended)
        }
        guard first else { return }
        if let watch { store.removeWatch(watch) }
        _ = store.forget(token)
        if let reason { subscriber.ended(reason) }
    }
}
