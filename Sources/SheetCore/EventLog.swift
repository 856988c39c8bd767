/// A session's newest events, oldest first, bounded to `Sheet.retainedEvents`.
///
/// A ring over one array: once full, appending overwrites the oldest slot, so an append is O(1)
/// and a long-lived session's memory stays flat. Equality and hashing follow the logical
/// sequence, not where the ring happens to start.
public struct EventLog: RandomAccessCollection, Hashable, Sendable {
    private var slots: [SheetEvent]
    /// The newest event's `seq` (0 when empty), kept beside the ring: a sheet's version is read
    /// on every request, and the ring's storage is usually cold in cache.
    private(set) var newestSeq: UInt64 = 0
    /// Physical index of the oldest event once the ring is full; 0 before. Last, so a `Sheet`'s
    /// one-byte fields fit in the bytes after it.
    private var head: UInt16
    private static let capacity = UInt16(Sheet.retainedEvents)

    init() {
        slots = []
        head = 0
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { slots.count }

    public subscript(position: Int) -> SheetEvent {
        precondition(position >= 0 && position < slots.count, "EventLog index out of range")
        let physical = position + Int(head)
        return slots[physical < slots.count ? physical : physical - slots.count]
    }

    /// The newest event; a sheet's log is never empty after creation.
    var newest: SheetEvent? {
        guard !slots.isEmpty else { return nil }
        return slots[head == 0 ? slots.count - 1 : Int(head) - 1]
    }

    mutating func append(_ event: SheetEvent) {
        newestSeq = event.seq
        if slots.count < Int(Self.capacity) {
            slots.append(event)
        } else {
            slots[Int(head)] = event
            head = head + 1 == Self.capacity ? 0 : head + 1
        }
    }

    public static func == (lhs: EventLog, rhs: EventLog) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for event in self { hasher.combine(event) }
    }
}
