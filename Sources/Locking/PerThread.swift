#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One `Value` per thread, made on the thread's first use and freed when the thread ends: for a
/// cache that every request thread reads. A `LockedValue` there costs each request a lock and
/// the reference counts of what it hands out, all on cache lines that then move between cores
/// with every request; a value of the thread's own costs neither.
///
/// Each thread's value lives in a `Slot` that the thread's key holds (one retain, taken when it
/// is made, released by the key's destructor as the thread ends). The key itself is never
/// deleted: a `PerThread` is meant to be a `static let`, which lives as long as the process.
// @unchecked Sendable: a thread only ever reaches its own slot (`pthread_getspecific`), so no
// value is shared; `key` and `make` are immutable.
package final class PerThread<Value>: @unchecked Sendable {
    private let key: pthread_key_t
    private let make: @Sendable () -> Value

    package init(_ make: @escaping @Sendable () -> Value) {
        var key = pthread_key_t()
        let result = pthread_key_create(&key) { slot in
            // Balances the passRetained in `withValue`: the thread that made this slot has ended.
            guard let slot else { return }
            Unmanaged<AnyObject>.fromOpaque(slot).release()
        }
        precondition(result == 0, "pthread_key_create failed (\(result)): too many thread-local keys")
        self.key = key
        self.make = make
    }

    /// Calls `body` with the calling thread's value.
    package func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        guard let raw = pthread_getspecific(key) else {
            let slot = Slot(make())
            // Released by the key's destructor when this thread ends.
            precondition(pthread_setspecific(key, Unmanaged.passRetained(slot).toOpaque()) == 0, "pthread_setspecific failed")
            return try body(&slot.value.pointee)
        }
        // Borrowed: the key holds the slot until this thread ends, so no reference count changes.
        return try Unmanaged<Slot>.fromOpaque(raw)._withUnsafeGuaranteedRef { slot in try body(&slot.value.pointee) }
    }

    /// A thread's value, behind a pointer of its own (see `LockedValue`: an inout access to a
    /// class's stored property pays a dynamic exclusivity check).
    private final class Slot {
        /// Allocated in `init`, freed in `deinit`.
        let value: UnsafeMutablePointer<Value>

        init(_ value: Value) {
            self.value = .allocate(capacity: 1)
            self.value.initialize(to: value)
        }

        deinit {
            value.deinitialize(count: 1)
            value.deallocate()
        }
    }
}
