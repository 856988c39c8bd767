#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Marks the threads that are answering a request inline: a libmicrohttpd thread inside its
/// access handler, running the request's own task until it has to wait. Such a thread must run
/// nothing but that request's work; `InlineSerialExecutor` checks, in debug builds, that it
/// never drains queued jobs on one.
package enum InlineExecution {
    /// A thread-specific slot: non-nil while the thread is inside `run`.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// True on a thread that is inside `run`.
    package static var isActive: Bool {
        pthread_getspecific(key) != nil
    }

    /// Runs `body` with this thread marked as answering inline (nested calls keep the mark).
    package static func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))   // any non-nil value: only presence matters
        defer { pthread_setspecific(key, previous) }
        return try body()
    }

    /// The calling thread, as a number an atomic or a lock-guarded field can hold.
    package static var currentThread: UInt {
        UInt(pthread_self())
    }
}
