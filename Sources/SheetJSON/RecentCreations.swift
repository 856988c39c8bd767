import SheetCore
import Locking

/// The latest creation bodies and what they decoded to. Clients create sessions with the same
/// few bodies (`{"detents":["medium","large"]}`), and decoding one builds and validates a whole
/// configuration; a body seen lately is answered from here, byte-equal bodies decoding alike.
///
/// Equal configurations decoded here also share one storage: the sessions made from one body
/// hold one configuration between them, and `ConfigurationRenderings` finds them by identity.
/// Bounded (`RecentSlots`), bodies of at most `maximumBodyLength` bytes.
enum RecentCreations {
    static let maximumBodyLength = 1024

    private struct Entry {
        let body: [UInt8]
        let configuration: SheetConfiguration
        let parent: SessionID?
    }

    private static let slots = LockedValue(RecentSlots<Entry>(capacity: 8, seenCount: 16))

    /// What `body` decoded to when it was last seen, if it was; else whether to `remember` it.
    static func decoded(_ body: [UInt8], fingerprint: UInt64) -> (decoded: (configuration: SheetConfiguration, parent: SessionID?)?, remember: Bool) {
        slots.withLock { slots in
            guard let index = slots.index(of: fingerprint, where: { sameBytes($0.body, body) }) else {
                return (nil, slots.missedLately(fingerprint))
            }
            return ((slots[index].configuration, slots[index].parent), false)
        }
    }

    /// Keeps what `body` decoded to.
    static func remember(_ body: [UInt8], fingerprint: UInt64, configuration: SheetConfiguration, parent: SessionID?) {
        let entry = Entry(body: body, configuration: configuration, parent: parent)
        let replaced: Entry? = slots.withLock { slots in
            if slots.index(of: fingerprint, where: { sameBytes($0.body, body) }) != nil { return nil }
            return slots.insert(entry, fingerprint: fingerprint)
        }
        _ = replaced   // released here, after the lock
    }

    /// The length and the first and last eight bytes; nil for a body too long to keep.
    static func fingerprint(_ body: [UInt8]) -> UInt64? {
        guard body.count <= maximumBodyLength else { return nil }
        return body.withUnsafeBytes { bytes in
            let count = bytes.count
            var head: UInt64 = 0
            var tail: UInt64 = 0
            if count >= 8 {
                head = bytes.loadUnaligned(as: UInt64.self)
                tail = bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            } else {
                for byte in bytes { head = head << 8 | UInt64(byte) }
            }
            return (head &* 0x9E37_79B9_7F4A_7C15) ^ tail ^ UInt64(count) &* 0xC2B2_AE3D_27D4_EB4F
        }
    }

    /// Byte equality, eight bytes at a time (`==` of two arrays compares byte by byte).
    private static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in
                let count = a.count
                var offset = 0
                while offset + 8 <= count {
                    if a.loadUnaligned(fromByteOffset: offset, as: UInt64.self) != b.loadUnaligned(fromByteOffset: offset, as: UInt64.self) { return false }
                    offset += 8
                }
                while offset < count {
                    if a[offset] != b[offset] { return false }
                    offset += 1
                }
                return true
            }
        }
    }
}
