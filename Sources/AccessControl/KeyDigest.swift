/// The SHA-256 of an API key, as four 64-bit words. Deliberately not `Equatable`: the synthesized
/// `==` stops at the first differing word, and a digest is only ever compared with `matches`.
public struct KeyDigest: Sendable {
    let words: (UInt64, UInt64, UInt64, UInt64)

    /// `bytes` must be 32 bytes (a SHA-256).
    init(_ bytes: [UInt8]) {
        precondition(bytes.count == SHA256.digestLength, "a key digest is 32 bytes")
        func word(_ start: Int) -> UInt64 {
            var value: UInt64 = 0
            for byte in bytes[start..<(start + 8)] { value = value << 8 | UInt64(byte) }
            return value
        }
        words = (word(0), word(8), word(16), word(24))
    }

    /// The digest of a presented key.
    public init(ofKey key: some Sequence<UInt8>) {
        self.init(SHA256.digest(key))
    }

    /// Constant time by construction: all four words are XORed and the differences ORed into one
    /// accumulator, with no branch and no early exit, so the time taken does not depend on where
    /// (or whether) the digests differ.
    public func matches(_ other: KeyDigest) -> Bool {
        let difference = (words.0 ^ other.words.0) | (words.1 ^ other.words.1)
            | (words.2 ^ other.words.2) | (words.3 ^ other.words.3)
        return difference == 0
    }

    public var hex: String {
        var bytes: [UInt8] = []
        for word in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Hex.encode(bytes)
    }
}
