import Locking
import Synchronization

/// Closed while a store's sessions are still being read back from its archive; calls that name
/// sessions, count them or list them wait here until the store holds all of them, so none is
/// answered "not found" or counted short because it was not read yet. Open from the start for a
/// store given its contents up front.
///
/// Waiting costs the open store one atomic load (`isOpen`); the lock is only taken while closed.
final class RestoreGate: Sendable {
    private let open: Atomic<Bool>
    private let waiters = LockedValue<[UnsafeContinuation<Void, Never>]>([])

    init(open: Bool) {
        self.open = Atomic(open)
    }

    var isOpen: Bool { open.load(ordering: .acquiring) }

    /// Returns once the gate is open. Unsafe continuations: each is resumed exactly once, by
    /// `openNow` or right here when the gate opened before it could be parked.
    func wait() async {
        if isOpen { return }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            let parked = waiters.withLock { list -> Bool in
                if open.load(ordering: .acquiring) { return false }
                list.append(continuation)
                return true
            }
            if !parked { continuation.resume() }
        }
    }

    /// Calls parked here now (tests wait for a call to park before they open the gate).
    var waiting: Int { waiters.withLock { $0.count } }

    /// Opens the gate for good and lets every waiter go on.
    func openNow() {
        let released = waiters.withLock { list -> [UnsafeContinuation<Void, Never>] in
            open.store(true, ordering: .releasing)
            defer { list = [] }
            return list
        }
        for waiter in released { waiter.resume() }
    }
}
