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

    @inline(never)  // called from async frames, which would hold its locals otherwise
    func id(for head: HTTPRequestHead) -> String {
        if let given = head.headers["X-Request-Id"], (1...128).contains(given.utf8.count),
           given.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) {
            return given
        }
        let number = counter.add(1, ordering: .relaxed).newValue
        return Self.format(prefix: prefix, number: number)
    }

    /// `prefix-number` with the number in base 36, built as one String (no intermediate ones).
    static func format(prefix: String, number: UInt64) -> String {
        var prefix = prefix
        // 13 base-36 digits hold any UInt64.
        var digits = 1
        var bound: UInt64 = 36
        while digits < 13 && number >= bound { digits += 1; bound &*= 36 }
        return prefix.withUTF8 { head in
            // The exact length: up to 15 bytes, a String stores them inline, without allocating.
            String(unsafeUninitializedCapacity: head.count + 1 + digits) { out in
                var index = 0
                for byte in head { out[index] = byte; index += 1 }
                out[index] = UInt8(ascii: "-")
                index += 1
                var rest = number
                var position = index + digits
                repeat {
                    position -= 1
                    let digit = UInt8(truncatingIfNeeded: rest % 36)
                    out[position] = digit < 10 ? 48 + digit : 87 + digit  // 0-9, a-z
                    rest /= 36
                } while rest > 0
                return index + digits
            }
        }
    }
}
