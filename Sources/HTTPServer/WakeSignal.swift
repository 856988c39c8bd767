import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An eventfd that wakes the server's own plain-thread loops (the socket watcher, the accept
/// loop) from other threads: `signal()` writes it, the loop waits on `fd` and drains it.
final class WakeSignal: Sendable {
    /// The eventfd (close-on-exec, non-blocking), or -1 if none could be made.
    let fd: Int32

    init() {
        fd = sheetd_wake_descriptor()
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    func signal() {
        guard fd >= 0 else { return }
        var one: UInt64 = 1
        _ = write(fd, &one, MemoryLayout<UInt64>.size)
    }

    /// Waits up to `milliseconds` (for ever when negative) for `signal()`, and resets it if it
    /// came. True when signalled; false when the time ran out or the wait was interrupted. Without
    /// a descriptor (`fd` of -1) it only waits out the time.
    @discardableResult
    func wait(milliseconds: Int32) -> Bool {
        sheetd_accept_wait(-1, fd, milliseconds) == 2
    }

    /// Resets it after a wake-up, so the next wait blocks until the next `signal()`.
    func drain() {
        guard fd >= 0 else { return }
        var value: UInt64 = 0
        _ = read(fd, &value, MemoryLayout<UInt64>.size)
    }
}
