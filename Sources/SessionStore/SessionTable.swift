import SheetCore

/// A shard's sessions by id, kept in 16 dictionaries picked by four random bits of the id.
///
/// Ids are random, so every shard's one dictionary used to fill at the same pace and double at
/// about the same moment: the insert that doubled it rehashed the whole shard on a request thread
/// (10 ms at the median and 23 ms at most past 786,432 sessions, holding up every connection on
/// that thread). Split sixteen ways, each doubling moves a sixteenth of the shard, and the
/// doublings fall on sixteen times as many inserts.
struct SessionTable<Value> {
    /// Inline, so reaching a part checks no outer buffer for uniqueness.
    private typealias Parts = InlineArray<16, [SessionID: Value]>

    /// The top bits of `high` pick the part: random for every id, also for one presented over
    /// another, whose low 32 bits are its parent's (`SessionID.random(inChainOf:)`).
    private static var partShift: UInt64 { UInt64(64 - Parts.count.trailingZeroBitCount) }

    private var parts: Parts

    /// Where a session is, as `index(forKey:)` finds it; valid until the table's next insert or removal.
    struct Index {
        fileprivate let part: Int
        fileprivate let inner: Dictionary<SessionID, Value>.Index
    }

    init() {
        parts = Parts(repeating: [:])
    }

    /// A table of `elements`, each part allocated once at the size it ends up holding.
    init<Elements: Collection>(_ elements: Elements, id: (Elements.Element) -> SessionID,
                               value: (Elements.Element) -> Value) {
        self.init()
        var sizes = [Int](repeating: 0, count: Parts.count)
        for element in elements { sizes[Self.part(of: id(element))] += 1 }
        for part in parts.indices { parts[part].reserveCapacity(sizes[part]) }
        for element in elements {
            let key = id(element)
            parts[Self.part(of: key)][key] = value(element)
        }
    }

    @inline(__always)
    private static func part(of id: SessionID) -> Int { Int(truncatingIfNeeded: id.high >> partShift) }

    var count: Int {
        var total = 0
        for part in parts.indices { total += parts[part].count }
        return total
    }

    var isEmpty: Bool { count == 0 }

    subscript(id: SessionID) -> Value? {
        get { parts[Self.part(of: id)][id] }
        _modify { yield &parts[Self.part(of: id)][id] }
    }

    @inline(__always)
    func index(forKey id: SessionID) -> Index? {
        let part = Self.part(of: id)
        return parts[part].index(forKey: id).map { Index(part: part, inner: $0) }
    }

    /// The value at `index`, changed in place: the entry is not copied out and back.
    subscript(at index: Index) -> Value {
        get { parts[index.part].values[index.inner] }
        _modify { yield &parts[index.part].values[index.inner] }
    }

    @discardableResult
    mutating func removeValue(forKey id: SessionID) -> Value? {
        parts[Self.part(of: id)].removeValue(forKey: id)
    }
}
