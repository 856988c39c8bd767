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
    /// 0 to 63; above 63 for any other byte (a byte past ASCII sets bit 7, `~` in the table
    /// makes 78).
    @inline(__always)
    private static func sixBits(of byte: UInt8) -> Int {
        (Int(values.utf8Start[Int(byte & 0x7F)]) - 48) | Int(byte & 0x80)
    }

    /// Each ASCII byte's value plus 48 (`0` is A's 0, `o` is `_`'s 63), `~` for bytes outside the
    /// alphabet: a literal, so a constant in the binary, read without a lazy-initialisation or
    /// bounds check (a table in a global has both; ranges cost a dozen instructions a byte).
    private static var values: StaticString {
        #"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~n~~defghijklm~~~~~~~0123456789:;<=>?@ABCDEFGHI~~~~o~JKLMNOPQRSTUVWXYZ[\]^_`abc~~~~~"#
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

    /// Reads the characters in three runs straight into their places (ten for the top 60 bits of
    /// `high`, one across the two words, ten more, and the last 2 bits of `low`), and checks the
    /// alphabet once at the end: a byte outside it has a value above 63.
    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> SessionID? {
        guard utf8.count == 22, let base = utf8.baseAddress else { return nil }
        var invalid = 0
        let top = bits(of: base, count: 10, gathering: &invalid)
        let across = sixBits(of: base[10])
        let bottom = bits(of: base + 11, count: 10, gathering: &invalid)
        let last = sixBits(of: base[21])
        // The last character carries the final 2 bits in its top bits; the rest must be zero.
        guard (invalid | across | last) & ~63 == 0, last & 0b1111 == 0 else { return nil }
        return SessionID(high: top << 4 | UInt64(across >> 2),
                         low: UInt64(across & 0b11) << 62 | bottom << 2 | UInt64(last >> 4))
    }

    /// The values of the `count` characters at `start`, six bits each, the first in the highest;
    /// every value is also ORed into `invalid`, which a byte outside the alphabet takes above 63.
    @inline(__always)
    private static func bits(of start: UnsafePointer<UInt8>, count: Int, gathering invalid: inout Int) -> UInt64 {
        var bits: UInt64 = 0
        for index in 0..<count {
            let value = sixBits(of: start[index])
            invalid |= value
            bits = bits << 6 | UInt64(truncatingIfNeeded: value)
        }
        return bits
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
