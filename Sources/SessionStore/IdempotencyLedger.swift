import SheetCore

/// Remembers the first answer given for each `Idempotency-Key`, so a retried request is answered
/// the same without being applied twice. Bounded: past `capacity` keys the oldest is forgotten
/// first, and a key is forgotten `lifetime` after it was first used.
struct IdempotencyLedger: Sendable {
    struct Key: Hashable, Sendable {
        let scope: SessionID?   // nil: `POST /sessions`, global
        let key: String
    }

    /// What identifies "the same request": method, path and body, hashed.
    struct Fingerprint: Hashable, Sendable {
        let value: UInt64
        let check: UInt64
    }

    struct Entry: Sendable {
        let fingerprint: Fingerprint
        let answer: StoredAnswer
        let storedAt: Timestamp
    }

    enum Lookup: Sendable {
        case miss
        case replay(StoredAnswer)
        case reused
    }

    private(set) var entries: [Key: Entry] = [:]
    /// Insertion order, for dropping the oldest; `head` skips what was already dropped.
    private var order: [Key] = []
    private var head = 0
    let capacity: Int
    let lifetimeMilliseconds: Int64

    init(capacity: Int, lifetimeMilliseconds: Int64 = 24 * 3600 * 1000) {
        self.capacity = max(1, capacity)
        self.lifetimeMilliseconds = lifetimeMilliseconds
    }

    var count: Int { entries.count }

    func lookup(_ key: Key, fingerprint: Fingerprint, now: Timestamp) -> Lookup {
        guard let entry = entries[key],
              now.millisecondsSince1970 - entry.storedAt.millisecondsSince1970 < lifetimeMilliseconds
        else { return .miss }
        return entry.fingerprint == fingerprint ? .replay(entry.answer) : .reused
    }

    /// Returns the keys dropped to stay within `capacity`, so a durable store can drop them too.
    @discardableResult
    mutating func store(_ answer: StoredAnswer, for key: Key, fingerprint: Fingerprint, now: Timestamp) -> [Key] {
        if entries.updateValue(Entry(fingerprint: fingerprint, answer: answer, storedAt: now), forKey: key) == nil {
            order.append(key)
        }
        var dropped: [Key] = []
        while entries.count > capacity, head < order.count {
            if entries.removeValue(forKey: order[head]) != nil { dropped.append(order[head]) }
            head += 1
        }
        compactIfWasteful()
        return dropped
    }

    /// Forgets keys older than the lifetime. A deleted session's keys age out like any other, so a
    /// retry that arrives after the delete still gets the first answer.
    mutating func expire(now: Timestamp) {
        while head < order.count {
            let key = order[head]
            if let entry = entries[key],
               now.millisecondsSince1970 - entry.storedAt.millisecondsSince1970 < lifetimeMilliseconds {
                break
            }
            entries.removeValue(forKey: key)
            head += 1
        }
        compactIfWasteful()
    }

    private mutating func compactIfWasteful() {
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    static func fingerprint(method: String, path: String, body: [UInt8]) -> Fingerprint {
        // Two independent 64-bit FNV-1a style hashes: a collision would need both to collide.
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x84222325_cbf29ce4
        func mix(_ byte: UInt8) {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            b = (b &+ UInt64(byte) &+ 1) &* 0x9e37_79b9_7f4a_7c15
            b ^= b >> 29
        }
        for byte in method.utf8 { mix(byte) }
        mix(0)
        for byte in path.utf8 { mix(byte) }
        mix(0)
        for byte in body { mix(byte) }
        return Fingerprint(value: a, check: b)
    }
}
