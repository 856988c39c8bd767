/// A bounded memo of values the service computes again and again (a configuration's rendering,
/// what a creation body decodes to), shared by the answering threads behind a lock.
///
/// `capacity` entries at most, replaced in turn; an entry is found by a 64-bit fingerprint
/// first and then by the caller's exact comparison. A value is worth keeping the second time
/// it misses within the last `seenCount` misses: a stream of values that never repeat costs
/// a lookup each, not a copy and a replacement each.
struct RecentSlots<Entry> {
    let capacity: Int
    let seenCount: Int
    private var fingerprints: [UInt64] = []
    private var entries: [Entry] = []
    /// The entry the next admission replaces, once all are taken.
    private var next = 0
    /// Fingerprints of the latest misses, a ring.
    private var seen: [UInt64]
    private var nextSeen = 0

    init(capacity: Int, seenCount: Int) {
        self.capacity = capacity
        self.seenCount = seenCount
        seen = [UInt64](repeating: 0, count: seenCount)
    }

    /// The entry with `fingerprint` that `matches`, if any.
    func index(of fingerprint: UInt64, where matches: (Entry) -> Bool) -> Int? {
        for index in fingerprints.indices where fingerprints[index] == fingerprint && matches(entries[index]) {
            return index
        }
        return nil
    }

    subscript(index: Int) -> Entry { entries[index] }

    /// After a miss: whether `fingerprint` missed lately too (then the value is worth keeping);
    /// records it when not.
    mutating func missedLately(_ fingerprint: UInt64) -> Bool {
        for index in seen.indices where seen[index] == fingerprint { return true }
        seen[nextSeen] = fingerprint
        nextSeen = nextSeen + 1 == seenCount ? 0 : nextSeen + 1
        return false
    }

    /// Keeps `entry`; returns the one it replaced, for the caller to release outside the lock.
    mutating func insert(_ entry: Entry, fingerprint: UInt64) -> Entry? {
        if entries.count < capacity {
            fingerprints.append(fingerprint)
            entries.append(entry)
            return nil
        }
        let index = next
        next = index + 1 == capacity ? 0 : index + 1
        fingerprints[index] = fingerprint
        let old = entries[index]
        entries[index] = entry
        return old
    }
}

extension RecentSlots: Sendable where Entry: Sendable {}
