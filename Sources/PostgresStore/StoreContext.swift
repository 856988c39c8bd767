import Locking
import SessionStore
import SheetCore
import Timekeeping

/// What the committers, the listener and the store share.
final class StoreContext: Sendable {
    let url: String
    let limits: Batch.Limits
    let clock: StoreClock
    /// What long-poll deadlines and the reconnect backoff are measured on.
    let timerClock: any ServiceClock
    let health = Health()
    let presenters = Presenters()
    /// Sessions read since the last sweep and when: their last access is saved by the sweep in
    /// one statement, instead of a write (and a row lock) for every read.
    let touches = LockedValue<[SessionID: Int64]>([:])
    /// Where failures nobody asked about are reported (the service's error log).
    let report: @Sendable (String) -> Void

    init(url: String, limits: Batch.Limits, clock: StoreClock, timerClock: any ServiceClock,
         report: @escaping @Sendable (String) -> Void) {
        self.url = url
        self.limits = limits
        self.clock = clock
        self.timerClock = timerClock
        self.report = report
    }

    /// After a commit: remembers the reads, and wakes this instance's presenters of the changed
    /// sessions at once (the other instances learn it from the `NOTIFY`).
    func committed(changed: [SessionID], touched: [SessionID]) {
        if !touched.isEmpty {
            let now = clock.now().millisecondsSince1970
            touches.withLock { touches in
                for id in touched { touches[id] = now }
            }
        }
        if !changed.isEmpty { presenters.changed(changed) }
    }

    func reportFailure(_ message: String) { report(message) }
}

/// Which of the store's connections are down, and why: `/healthz` and every 503 say so.
final class Health: Sendable {
    private let reasons = LockedValue<[Int: String]>([:])

    func lost(_ slot: Int, _ reason: String) {
        reasons.withLock { $0[slot] = reason }
    }

    func restored(_ slot: Int) {
        reasons.withLock { $0[slot] = nil }
    }

    /// The database answers again (the listener is back): every slot is cleared. A committer
    /// connects again only when it has work, and says so if it still cannot.
    func restoredAll() {
        reasons.withLock { $0 = [:] }
    }

    /// The reason of the lowest slot that is down; nil when every connection is up.
    var reason: String? {
        reasons.withLock { reasons in reasons.min { $0.key < $1.key }?.value }
    }
}

/// The `NOTIFY` every commit that changes or removes sessions sends: their ids, separated by
/// spaces, on one channel that every instance listens to. PostgreSQL delivers it only once the
/// transaction has committed, and only if it did.
enum Notification {
    static let channel = "sheetd_sessions"
    /// PostgreSQL takes payloads shorter than 8000 bytes.
    static let payloadLimit = 7800

    static func payloads(naming ids: [SessionID]) -> [String] {
        var payloads: [String] = []
        var current = ""
        for id in ids {
            let text = id.description
            if !current.isEmpty, current.utf8.count + 1 + text.utf8.count > payloadLimit {
                payloads.append(current)
                current = ""
            }
            current += current.isEmpty ? text : " " + text
        }
        if !current.isEmpty { payloads.append(current) }
        return payloads
    }

    static func sessions(in payload: String) -> [SessionID] {
        payload.split(separator: " ").compactMap { SessionID($0) }
    }
}
