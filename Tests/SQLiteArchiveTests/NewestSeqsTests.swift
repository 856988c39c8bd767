@testable import SQLiteArchive
import Testing

/// The writer's table of each stored session's newest seq (`NewestSeqs`), on its own.
@Suite("SQLite archive: newest seq by ordinal")
struct NewestSeqsTests {
    /// Ordinals at the edges of pages of 512, and one far away.
    static let ordinals: [UInt64] = [0, 1, 511, 512, 513, 1023, 1024, 1 << 40, UInt64.max]

    @Test("what is set is read back, and nothing else is there", arguments: ordinals)
    func setAndRead(ordinal: UInt64) {
        var table = NewestSeqs()
        #expect(table[ordinal] == nil)
        table.set(7, for: ordinal)
        #expect(table[ordinal] == 7)
        for other in Self.ordinals where other != ordinal {
            #expect(table[other] == nil, "ordinal \(other) after setting \(ordinal)")
        }
        table.set(9, for: ordinal)
        #expect(table[ordinal] == 9)
        #expect(table.pageCount == 1)
    }

    @Test("update changes a stored ordinal only", arguments: ordinals)
    func update(ordinal: UInt64) {
        var table = NewestSeqs()
        let updatedWhileMissing = table.update(3, for: ordinal)
        #expect(!updatedWhileMissing)
        #expect(table[ordinal] == nil)
        #expect(table.pageCount == 0)
        // A neighbour on the same page is stored: the page exists, the ordinal still is not.
        let neighbour = ordinal ^ 1
        table.set(2, for: neighbour)
        let updatedBesideNeighbour = table.update(3, for: ordinal)
        #expect(!updatedBesideNeighbour)
        #expect(table[ordinal] == nil)
        table.set(4, for: ordinal)
        let updated = table.update(5, for: ordinal)
        #expect(updated)
        #expect(table[ordinal] == 5)
        #expect(table[neighbour] == 2)
    }

    @Test("remove gives the seq back once, and frees a page with nothing left on it", arguments: ordinals)
    func remove(ordinal: UInt64) {
        var table = NewestSeqs()
        let removedWhileMissing = table.remove(ordinal)
        #expect(removedWhileMissing == nil)
        let neighbour = ordinal ^ 1
        table.set(6, for: ordinal)
        table.set(6, for: ordinal)   // set twice, stored once
        table.set(8, for: neighbour)
        let removed = table.remove(ordinal)
        #expect(removed == 6)
        let removedAgain = table.remove(ordinal)
        #expect(removedAgain == nil)
        #expect(table[ordinal] == nil)
        #expect(table.pageCount == 1, "the neighbour keeps the page")
        let removedNeighbour = table.remove(neighbour)
        #expect(removedNeighbour == 8)
        #expect(table.pageCount == 0)
    }

    @Test("a churn of creates and deletes leaves only the pages of what is stored")
    func churn() {
        var table = NewestSeqs()
        var stored: [UInt64: UInt64] = [:]
        // Creation order, each session deleted 3,000 creations later, except every 1,000th.
        for ordinal in UInt64(1)...20_000 {
            table.set(1, for: ordinal)
            stored[ordinal] = 1
            if ordinal > 3_000, (ordinal - 3_000) % 1_000 != 0 {
                let removedOld = table.remove(ordinal - 3_000)
                #expect(removedOld != nil && removedOld == stored[ordinal - 3_000])
                stored[ordinal - 3_000] = nil
            }
            if ordinal % 7 == 0 {
                let updatedNow = table.update(ordinal, for: ordinal)
                #expect(updatedNow)
                stored[ordinal] = ordinal
            }
        }
        for ordinal in UInt64(0)...20_001 {
            #expect(table[ordinal] == stored[ordinal], "ordinal \(ordinal)")
        }
        let pages = Set(stored.keys.map { $0 >> 9 })
        #expect(table.pageCount == pages.count)
    }
}
