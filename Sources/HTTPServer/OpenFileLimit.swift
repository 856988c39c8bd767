#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's open-file limit (`ulimit -n`), and whether it leaves room for more descriptors.
/// Each connection takes one, so a server whose own descriptors leave none would listen on a
/// socket whose connections could never be accepted.
public enum OpenFileLimit {
    /// The limit now (the soft limit, which a process may change while it runs).
    public static var current: UInt64 {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return UInt64(limit.rlim_cur)
    }

    /// Whether `count` more descriptors can be opened now: tried by duplicating standard error,
    /// closed again at once (with standard error closed, this cannot be told, and is assumed).
    public static func hasRoom(for count: Int) -> Bool {
        var taken: [Int32] = []
        defer { for fd in taken { close(fd) } }
        for _ in 0..<max(0, count) {
            let fd = fcntl(2, F_DUPFD_CLOEXEC, 0)
            guard fd >= 0 else { return errno != EMFILE && errno != ENFILE }
            taken.append(fd)
        }
        return true
    }
}
