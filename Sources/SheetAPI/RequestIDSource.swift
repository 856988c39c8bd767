import HTTPServer
import Synchronization

/// Request ids: the client's `X-Request-Id` when it is 1 to 128 visible ASCII characters, else
/// one made here from a random per-process prefix and a counter (unique, and cheap per request).
final class RequestIDSource: Sendable {
    private let prefix: String
    private let counter = Atomic<UInt64>(0)

    init() {
        var generator = SystemRandomNumberGenerator()
        let random: UInt64 = generator.next()
        prefix = String(random & 0xFFFF_FFFF_FFFF, radix: 36)
    }

    func id(for head: HTTPRequestHead) -> String {
        if let given = head.headers["X-Request-Id"], (1...128).contains(given.utf8.count),
           given.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) {
            return given
        }
        let number = counter.add(1, ordering: .relaxed).newValue
        return prefix + "-" + String(number, radix: 36)
    }
}
