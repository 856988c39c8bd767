import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the open-file limit (`ulimit -n`) leaves room for, settled before the first connection
/// is accepted. Connections may then take every descriptor left (the accept loop waits for one
/// to be freed, and says so once), so whatever sheetd itself still needs must be taken before,
/// or be left room for.
///
/// libdispatch, which runs every sleeping task's timer, makes its event loop's descriptors (an
/// epoll set and an eventfd) the first time a timer needs them, and aborts the process when it
/// cannot. Left to the first sleep after start-up, that could come after connections had taken
/// the last descriptor: sheetd would crash where it should only stop accepting. So they are
/// taken first. Its timerfds (one per clock) are made when a timer on that clock is first armed,
/// which may be later; a failure there only delays that clock's timers, but room is left for
/// them, so that they do not take the one descriptor a connection was counted on.
enum DescriptorBudget {
    /// libdispatch's event loop: its epoll set and its eventfd.
    static let eventLoopDescriptors: Int32 = 2
    /// libdispatch's timerfds, one for each of its three clocks.
    static let timerDescriptors: Int32 = 3

    /// Takes the event loop's descriptors: fires one timer on each clock sheetd's tasks sleep
    /// on (the continuous clock, and the uptime clock of `DispatchTime`) and waits for both. A
    /// timer fires only from the event loop, so its descriptors exist once one has. Returns
    /// false, having taken nothing, when the limit leaves no room for them and the timerfds.
    static func takeEventLoopDescriptors() -> Bool {
        guard hasRoom(for: eventLoopDescriptors + timerDescriptors) else { return false }
        let fired = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { fired.signal() }
        Task.detached {
            try? await Task.sleep(for: .milliseconds(1))
            fired.signal()
        }
        fired.wait()
        fired.wait()
        return true
    }

    /// Whether, once everything else is open, the limit leaves a descriptor for a connection
    /// beside the timerfds libdispatch may still make.
    static var hasRoomForAConnection: Bool { hasRoom(for: timerDescriptors + 1) }

    /// The open-file limit now (the soft limit, which a process may change while it runs).
    static var limit: UInt64 {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return UInt64(limit.rlim_cur)
    }

    /// Whether `count` more descriptors can be opened now: tried by duplicating standard error,
    /// closed again at once (with standard error closed, this cannot be told, and is assumed).
    private static func hasRoom(for count: Int32) -> Bool {
        var taken: [Int32] = []
        defer { for fd in taken { close(fd) } }
        for _ in 0..<count {
            let fd = fcntl(2, F_DUPFD_CLOEXEC, 0)
            guard fd >= 0 else { return errno != EMFILE && errno != ENFILE }
            taken.append(fd)
        }
        return true
    }
}
