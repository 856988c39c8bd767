#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SheetCore

/// Where the store reads the time: the system's wall clock in service, a fixed or stepped one in tests.
public struct StoreClock: Sendable {
    public let now: @Sendable () -> Timestamp

    public init(now: @escaping @Sendable () -> Timestamp) {
        self.now = now
    }

    /// CLOCK_REALTIME, to the millisecond.
    public static let system = StoreClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}
