@testable import SessionStore
import SheetCore
import Testing

/// A shard's table of sessions (`SessionTable`), on its own: it must answer exactly as the one
/// dictionary it replaced, whichever of its parts an id falls in.
@Suite("Session store: the shard's session table")
struct SessionTableTests {
    /// Ids in the first, a middle and the last part, and two that share their low 32 bits (as a
    /// chain's sessions do) but not their part.
    static let ids: [SessionID] = [
        SessionID(high: 0, low: 0),
        SessionID(high: 0x7FFF_FFFF_FFFF_FFFF, low: 42),
        SessionID(high: UInt64.max, low: UInt64.max),
        SessionID(high: 0x1000_0000_0000_0000, low: 0xDEAD_BEEF),
        SessionID(high: 0xE000_0000_0000_0000, low: 0xDEAD_BEEF),
    ]

    @Test("what is stored is found, changed in place, and removed", arguments: ids)
    func storeFindChangeRemove(id: SessionID) throws {
        var table = SessionTable<Int>()
        #expect(table[id] == nil && table.index(forKey: id) == nil && table.isEmpty)
        table[id] = 1
        #expect(table[id] == 1 && table.count == 1)
        for other in Self.ids where other != id {
            #expect(table[other] == nil, "\(other) after storing \(id)")
        }
        let index = try #require(table.index(forKey: id))
        table[at: index] += 10
        #expect(table[id] == 11)
        table[id]? += 100
        #expect(table[id] == 111)
        #expect(table.removeValue(forKey: id) == 111)
        #expect(table[id] == nil && table.isEmpty && table.removeValue(forKey: id) == nil)
    }

    /// Ids spread over every part: a counter through Fibonacci hashing.
    static func id(_ number: Int) -> SessionID {
        SessionID(high: UInt64(number) &* 0x9E37_79B9_7F4A_7C15, low: UInt64(number))
    }

    @Test("a churn of creates, changes and removals answers as one dictionary does", arguments: [2, 3, 5])
    func churnMatchesDictionary(removeEvery: Int) {
        var table = SessionTable<Int>()
        var reference: [SessionID: Int] = [:]
        for step in 0 ..< 30_000 {
            let created = Self.id(step)
            table[created] = step
            reference[created] = step
            if step % 3 == 0 {
                let changed = Self.id(step / 2)
                if let index = table.index(forKey: changed) { table[at: index] += 1 }
                reference[changed]? += 1
            }
            if step % removeEvery == 0 {
                let removed = Self.id(step / 3)
                #expect(table.removeValue(forKey: removed) == reference.removeValue(forKey: removed))
            }
        }
        #expect(table.count == reference.count)
        for step in 0 ..< 30_000 { #expect(table[Self.id(step)] == reference[Self.id(step)]) }
    }

    @Test("a table made from a restore holds every element once")
    func madeFromElements() {
        let elements = (0 ..< 5_000).map { ordinal in (id: Self.id(ordinal), ordinal: ordinal) }
        let table = SessionTable(elements, id: \.id, value: \.ordinal)
        #expect(table.count == elements.count)
        for element in elements { #expect(table[element.id] == element.ordinal) }
        #expect(SessionTable([(id: SessionID, ordinal: Int)](), id: \.id, value: \.ordinal).isEmpty)
    }
}
