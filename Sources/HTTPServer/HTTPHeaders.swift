/// Case-insensitive header list, order preserved.
///
/// Stored as a flat array of pairs: requests carry a dozen headers at most, where a linear scan
/// with an allocation-free ASCII case-insensitive compare beats hashing.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    @usableFromInline var storage: [(name: String, value: String)]

    public init() { storage = [] }

    public init(_ pairs: [(String, String)]) {
        storage = pairs.map { (name: $0.0, value: $0.1) }
    }

    init(storage: [(name: String, value: String)]) { self.storage = storage }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// Reserves room for `count` pairs (used when the count is known up front).
    public mutating func reserveCapacity(_ count: Int) { storage.reserveCapacity(count) }

    /// The first value for `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        for pair in storage where pair.name.asciiCaseInsensitiveEquals(name) { return pair.value }
        return nil
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        storage.compactMap { $0.name.asciiCaseInsensitiveEquals(name) ? $0.value : nil }
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    public mutating func add(_ name: String, _ value: String) {
        storage.append((name: name, value: value))
    }

    /// Sets `name` to `value`, removing any existing value.
    public mutating func replace(_ name: String, _ value: String) {
        remove(name)
        storage.append((name: name, value: value))
    }

    public mutating func remove(_ name: String) {
        storage.removeAll { $0.name.asciiCaseInsensitiveEquals(name) }
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        storage.makeIterator()
    }

    public var description: String {
        storage.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}

extension String {
    /// ASCII case-insensitive equality without allocating (header names are ASCII tokens).
    @inlinable
    func asciiCaseInsensitiveEquals(_ other: String) -> Bool {
        var a = self.utf8.makeIterator()
        var b = other.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil):
                return true
            case let (x?, y?):
                if x == y { continue }
                let lx = (x >= 0x41 && x <= 0x5A) ? x | 0x20 : x
                let ly = (y >= 0x41 && y <= 0x5A) ? y | 0x20 : y
                if lx != ly { return false }
            default:
                return false
            }
        }
    }
}
