/// A session's identity: 128 bits from the system's secure random source, written as 22
/// characters of unpadded base64url so it is safe in a URL path without escaping.
///
/// It lives beside the sheet rather than in the store because sheets name each other: a sheet
/// presented over another records its parent, and the events `covered` and `uncovered` name the
/// child.
public struct SessionID: Hashable, Sendable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh id; `SystemRandomNumberGenerator` reads the kernel's CSPRNG (getrandom on Linux).
    public static func random() -> SessionID {
        var generator = SystemRandomNumberGenerator()
        return SessionID(high: generator.next(), low: generator.next())
    }

    /// The value of one character of the base64url alphabet (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`),
    /// -1 for any other byte. Ranges, not a table: a
    /// table in a global costs a lazy-initialisation check and a bounds check per character.
    @inline(__always)
    private static func sixBits(of byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): Int(byte) - 65
        case UInt8(ascii: "a")...UInt8(ascii: "z"): Int(byte) - 71
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte) + 4
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: -1
        }
    }

    /// Parses exactly the 22-character form `description` prints; anything else is nil, so one id has one spelling.
    public init?(_ text: Substring) {
        // Concrete (not `some StringProtocol`): a generic entry point is not specialised across
        // modules, and ids are parsed on every request.
        let parsed = text.utf8.withContiguousStorageIfAvailable { SessionID.parse($0) }
            ?? Array(text.utf8).withUnsafeBufferPointer { SessionID.parse($0) }
        guard let parsed else { return nil }
        self = parsed
    }

    public init?(_ text: String) {
        self.init(Substring(text))
    }

    /// The id spelled by these UTF-8 bytes (as `init?(_:)`).
    public init?(utf8: UnsafeBufferPointer<UInt8>) {
        guard let parsed = SessionID.parse(utf8) else { return nil }
        self = parsed
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> SessionID? {
        guard utf8.count == 22 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        var index = 0
        for byte in utf8 {
            let value = SessionID.sixBits(of: byte)
            guard value >= 0 else { return nil }
            let sixBits = UInt64(value)
            if index < 21 {
                // 21 characters carry 126 bits: shift the 128-bit (high, low) pair left by 6.
                high = (high << 6) | (low >> 58)
                low = (low << 6) | sixBits
            } else {
                // The last character carries the final 2 bits in its top bits; the rest must be zero.
                guard sixBits & 0b1111 == 0 else { return nil }
                high = (high << 2) | (low >> 62)
                low = (low << 2) | (sixBits >> 4)
            }
            index += 1
        }
        return SessionID(high: high, low: low)
    }

    public var description: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            writeDescription(into: buffer)
            return Self.textLength
        }
    }

    /// The length of every `description`.
    public static let textLength = 22

    /// Writes the bytes of `description` into the first `textLength` bytes of `out` (answers
    /// write ids without a String).
    public func writeDescription(into out: UnsafeMutableBufferPointer<UInt8>) {
        precondition(out.count >= Self.textLength, "a session id needs 22 bytes")
        let base = out.baseAddress!
        let alphabet = Self.alphabet.utf8Start
        // Six bits per character from the top: ten from `high`, one across the two words, ten
        // from `low`, and the last 2 bits of `low` at the top of the 22nd.
        for index in 0..<10 {
            base[index] = alphabet[Int(truncatingIfNeeded: (high >> UInt64(58 - 6 * index)) & 63)]
        }
        base[10] = alphabet[Int(truncatingIfNeeded: ((high & 0b1111) << 2) | (low >> 62))]
        for index in 0..<10 {
            base[11 + index] = alphabet[Int(truncatingIfNeeded: (low >> UInt64(56 - 6 * index)) & 63)]
        }
        base[21] = alphabet[Int(truncatingIfNeeded: (low & 0b11) << 4)]
    }

    /// The base64url alphabet in value order (the inverse of `sixBits(of:)`): a literal, so a
    /// constant in the binary, read without a lazy-initialisation or bounds check.
    private static var alphabet: StaticString { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" }
}

extension SessionID {
    /// The bits a store places a session by: the low 32. Every session of one chain has the same
    /// ones (see `random(inChainOf:)`), so a store that places by them keeps a chain in one place,
    /// whatever number of places (shards, partitions) it has.
    public var routingBits: UInt32 { UInt32(truncatingIfNeeded: low) }

    /// A fresh id for a sheet presented over `parent`: the parent's routing bits (and so its
    /// chain root's), 96 random bits for the rest. A store places the child beside its parent,
    /// and a change to the whole chain (a cascade) stays a change in one place; 96 random bits
    /// keep the id as unguessable as any.
    public static func random(inChainOf parent: SessionID) -> SessionID {
        let fresh = random()
        return SessionID(high: fresh.high, low: (fresh.low & ~UInt64(UInt32.max)) | UInt64(parent.routingBits))
    }
}
