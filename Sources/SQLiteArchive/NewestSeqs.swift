/// Each stored session's newest seq, by ordinal: what compaction asks of every log row it scans.
///
/// Ordinals are given in creation order, so the stored ones cluster: they are kept in pages of 512
/// consecutive ordinals, found through a dictionary of pages. A dictionary of every ordinal
/// rehashed all of them each time it doubled, on the writer thread between two commits (113 ms at
/// 786,432 sessions, a stall every durable answer queued behind); this one rehashes one entry per
/// page, and allocates a page once. It also takes 8 bytes a session where the dictionary took
/// 20–40. A page is freed when its last session is removed; a session that outlives its
/// neighbours keeps its page (4 KiB) alive.
struct NewestSeqs {
    private static let pageShift = 9
    private static let slotMask = UInt64(1 << pageShift - 1)

    private struct Page {
        /// 0 where no stored session has the ordinal: a stored session's seq is at least 1.
        var seqs = [UInt64](repeating: 0, count: 1 << NewestSeqs.pageShift)
        var stored = 0

        mutating func store(_ seq: UInt64, at slot: Int) {
            if seqs[slot] == 0 { stored += 1 }
            seqs[slot] = seq
        }
    }

    private var pages: [UInt64: Page] = [:]

    /// Pages allocated (what the tests check is given back).
    var pageCount: Int { pages.count }

    /// The newest seq of the stored session `ordinal`, nil if it is not stored.
    subscript(ordinal: UInt64) -> UInt64? {
        guard let page = pages[ordinal >> Self.pageShift] else { return nil }
        let seq = page.seqs[Int(ordinal & Self.slotMask)]
        return seq == 0 ? nil : seq
    }

    /// Stores `seq` for `ordinal`, whether it was stored before or not.
    mutating func set(_ seq: UInt64, for ordinal: UInt64) {
        precondition(seq > 0, "a stored session's seq is at least 1")
        let slot = Int(ordinal & Self.slotMask)
        // In place: the default page is made only when it is missing.
        pages[ordinal >> Self.pageShift, default: Page()].store(seq, at: slot)
    }

    /// Stores `seq` for `ordinal` if it is stored; false (and nothing changed) if it is not.
    mutating func update(_ seq: UInt64, for ordinal: UInt64) -> Bool {
        precondition(seq > 0, "a stored session's seq is at least 1")
        let slot = Int(ordinal & Self.slotMask)
        guard let index = pages.index(forKey: ordinal >> Self.pageShift), pages.values[index].seqs[slot] != 0 else { return false }
        pages.values[index].seqs[slot] = seq
        return true
    }

    /// Forgets `ordinal`; its newest seq, or nil if it was not stored.
    mutating func remove(_ ordinal: UInt64) -> UInt64? {
        let slot = Int(ordinal & Self.slotMask)
        guard let index = pages.index(forKey: ordinal >> Self.pageShift) else { return nil }
        let seq = pages.values[index].seqs[slot]
        guard seq != 0 else { return nil }
        pages.values[index].seqs[slot] = 0
        pages.values[index].stored -= 1
        if pages.values[index].stored == 0 { pages.remove(at: index) }
        return seq
    }
}

