/// A list of registered entries that are removed lazily: an append first drops the finished
/// ones once the list has doubled since the last such pass, so registering stays amortised O(1)
/// and the hot path never searches. The suspension registry and the connection tracker use it.
struct CompactingList<Element: Sendable>: Sendable {
    private(set) var elements: [Element] = []
    /// The smallest size at which an append compacts.
    private let floor: Int
    private var threshold: Int
    private let isFinished: @Sendable (Element) -> Bool

    init(compactingFrom floor: Int, dropping isFinished: @escaping @Sendable (Element) -> Bool) {
        self.floor = floor
        self.threshold = floor
        self.isFinished = isFinished
    }

    mutating func append(_ element: Element) {
        if elements.count >= threshold {
            elements.removeAll(where: isFinished)
            threshold = max(floor, elements.count * 2)
        }
        elements.append(element)
    }

    mutating func removeAll(where shouldRemove: (Element) throws -> Bool) rethrows {
        try elements.removeAll(where: shouldRemove)
    }

    /// Empties the list, returning the entries not finished yet.
    mutating func takeUnfinished() -> [Element] {
        let unfinished = elements.filter { !isFinished($0) }
        elements = []
        return unfinished
    }

    var unfinishedCount: Int { elements.reduce(0) { $0 + (isFinished($1) ? 0 : 1) } }
}
