import Locking
import SheetCore
import Timekeeping

/// This instance's long-polls and streams, by the session they watch. A commit (through any
/// instance: the listener passes on the `NOTIFY`) pokes the session's watches; a poked watch
/// reads the new events from the database. A poke carries no data, so a spurious or duplicated
/// one costs only a read, and after a reconnect every watch is poked (notifications sent while
/// the listener was away are lost).
final class Presenters: Sendable {
    private struct State {
        var bySession: [SessionID: [ObjectIdentifier: Watch]] = [:]
        var closed = false
    }

    private let state = LockedValue(State())

    /// A new watch on `id`, or nil once the store is shutting down.
    func watch(_ id: SessionID, onPoke: (@Sendable () -> Void)? = nil) -> Watch? {
        let watch = Watch(session: id, onPoke: onPoke)
        let added = state.withLock { state in
            guard !state.closed else { return false }
            state.bySession[id, default: [:]][ObjectIdentifier(watch)] = watch
            return true
        }
        return added ? watch : nil
    }

    func remove(_ watch: Watch) {
        state.withLock { state in
            state.bySession[watch.session]?[ObjectIdentifier(watch)] = nil
            if state.bySession[watch.session]?.isEmpty == true { state.bySession[watch.session] = nil }
        }
    }

    func changed(_ ids: [SessionID]) {
        let poked = state.withLock { state in ids.flatMap { state.bySession[$0].map { Array($0.values) } ?? [] } }
        for watch in poked { watch.poke() }
    }

    func pokeAll() {
        for watch in state.withLock({ $0.bySession.values.flatMap(\.values) }) { watch.poke() }
    }

    /// The sessions someone here watches: the sweep counts them as read, so a session with a
    /// presenter waiting on it is never idle.
    var watchedSessions: [SessionID] { state.withLock { Array($0.bySession.keys) } }

    /// Ends every watch and refuses new ones.
    func shutdown() {
        let all = state.withLock { state in
            state.closed = true
            defer { state.bySession = [:] }
            return state.bySession.values.flatMap(\.values)
        }
        for watch in all { watch.close() }
    }
}

/// One long-poll's or stream's interest in a session: counts pokes, and parks a waiter until
/// the next one.
final class Watch: Sendable {
    enum Wakeup: Sendable {
        case poked, timedOut, closed
    }

    private struct State {
        var pokes: UInt64 = 0
        var waiter: UnsafeContinuation<Wakeup, Never>?
        var timedOut = false
        var closed = false
    }

    let session: SessionID
    private let onPoke: (@Sendable () -> Void)?
    private let state = LockedValue(State())

    init(session: SessionID, onPoke: (@Sendable () -> Void)?) {
        self.session = session
        self.onPoke = onPoke
    }

    /// Pokes so far: read before a read of the database, passed to `next` after it, so a poke
    /// that came in between is not missed.
    var pokes: UInt64 { state.withLock { $0.pokes } }

    var isClosed: Bool { state.withLock { $0.closed } }

    func poke() {
        let waiter = state.withLock { state in
            state.pokes += 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .poked)
        onPoke?()
    }

    func close() {
        let waiter = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .closed)
        onPoke?()
    }

    /// Returns at the first poke after `seen` pokes, at `deadline` on `clock`, or when the watch
    /// is closed. Unsafe continuation: resumed exactly once, by whoever takes it out of `state`
    /// under the lock (a poke, the close, the timer), or right here when the outcome is known.
    func next(after seen: UInt64, until deadline: ContinuousClock.Instant, on clock: any ServiceClock) async -> Wakeup {
        state.withLock { $0.timedOut = false }
        let timer = Task { [self] in
            do { try await clock.sleep(until: deadline) } catch { return }
            let waiter = state.withLock { state in
                state.timedOut = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: .timedOut)
        }
        defer { timer.cancel() }
        return await withUnsafeContinuation { continuation in
            let known: Wakeup? = state.withLock { state in
                if state.closed { return .closed }
                if state.pokes != seen { return .poked }
                if state.timedOut { return .timedOut }
                state.waiter = continuation
                return nil
            }
            if let known { continuation.resume(returning: known) }
        }
    }
}
