import Locking

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--rate-limit N`: a token bucket per caller (per key, or per client address without keys),
/// holding at most N tokens and refilled at N per second; a request takes one token.
///
/// Buckets are spread over independent locks by their name, and each lock is held only for a few
/// arithmetic operations, so a caller over its limit never makes another caller wait: its
/// requests are refused at once, and nothing is queued or slowed down.
public final class RateLimiter: Sendable {
    /// Who a bucket belongs to.
    public enum BucketName: Hashable, Sendable {
        case key(UInt64)
        case address(String)
    }

    public enum Decision: Sendable, Equatable {
        case allowed
        /// Refused; a token is available again after this many whole seconds (at least 1).
        case limited(retryAfter: Int)
    }

    private struct Bucket {
        var tokens: Double
        var updatedNanoseconds: Int64
    }

    private let ratePerSecond: Double
    private let now: @Sendable () -> Int64
    private let stripes: [LockedValue<[BucketName: Bucket]>]
    /// A stripe at this many buckets forgets the full ones (a full bucket is the same as none),
    /// and if none is full, one other bucket, so client addresses cannot grow the table
    /// without bound (a forgotten bucket starts full again: bounded memory wins over a burst).
    private let bucketsPerStripe: Int

    /// `now`: a monotonic clock in nanoseconds (tests pass their own). `maximumBuckets`: how
    /// many callers are remembered at most.
    public init(requestsPerSecond: Int, maximumBuckets: Int = 65_536,
                now: @escaping @Sendable () -> Int64 = RateLimiter.monotonicNanoseconds) {
        ratePerSecond = Double(max(1, requestsPerSecond))
        self.now = now
        stripes = (0..<16).map { _ in LockedValue([:]) }
        bucketsPerStripe = max(1, maximumBuckets / 16)
    }

    /// Buckets remembered now (for tests).
    var bucketCount: Int { stripes.reduce(0) { $0 + $1.withLock { $0.count } } }

    public func take(_ name: BucketName) -> Decision {
        let stripe = stripes[Int(UInt(bitPattern: name.hashValue) % UInt(stripes.count))]
        let nowNanoseconds = now()
        let capacity = ratePerSecond
        let rate = ratePerSecond
        let limit = bucketsPerStripe
        return stripe.withLock { buckets in
            var bucket = buckets[name] ?? Bucket(tokens: capacity, updatedNanoseconds: nowNanoseconds)
            let elapsed = Double(max(0, nowNanoseconds - bucket.updatedNanoseconds)) / 1e9
            bucket.tokens = min(capacity, bucket.tokens + elapsed * rate)
            bucket.updatedNanoseconds = nowNanoseconds
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = .allowed
            } else {
                decision = .limited(retryAfter: max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))))
            }
            if buckets[name] == nil && buckets.count >= limit {
                buckets = buckets.filter { _, other in
                    other.tokens + Double(max(0, nowNanoseconds - other.updatedNanoseconds)) / 1e9 * rate < capacity
                }
                if buckets.count >= limit { buckets.remove(at: buckets.startIndex) }
            }
            buckets[name] = bucket
            return decision
        }
    }

    public static func monotonicNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
