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

    /// How many times `name` occurs (without building the values).
    public func count(of name: String) -> Int {
        var count = 0
        for pair in storage where pair.name.asciiCaseInsensitiveEquals(name) { count += 1 }
        return count
    }

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
        let a = self.utf8
        let b = other.utf8
        guard a.count == b.count else { return false }
        if let result = a.withContiguousStorageIfAvailable({ pa in
            b.withContiguousStorageIfAvailable { pb in Self.asciiCaseInsensitiveEquals(pa, pb) }
        }), let result {
            return result
        }
        return a.elementsEqual(b) { x, y in Self.asciiLower(x) == Self.asciiLower(y) }
    }

    @inlinable
    static func asciiCaseInsensitiveEquals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        for i in 0..<a.count where a[i] != b[i] {
            if asciiLower(a[i]) != asciiLower(b[i]) { return false }
        }
        return true
    }

    @inlinable @inline(__always)
    static func asciiLower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}
