#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Case-insensitive header list, order preserved.
///
/// Every field lives in one byte buffer (`FieldBytes`): reading a request's head copies its fields in with one
/// allocation instead of two Strings each, a lookup compares lengths and bytes without building
/// anything, and the response's fields reach libmicrohttpd as the C strings they already are.
/// Requests carry a dozen fields at most, where a linear scan beats hashing.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// nil while there is no field: an empty list allocates nothing.
    var storage: SharedFieldBytes?

    /// The bytes before a field's name: its name's and its value's lengths.
    static let prefixSize = 8

    public init() {}

    public init(_ pairs: [(String, String)]) {
        for (name, value) in pairs { add(name, value) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// A list of its own holding `template`'s fields, with room for `extraBytes` more bytes of
    /// fields: one allocation and one copy, where adding the fields again copies and checks each.
    /// (The template is borrowed: a list every request starts from is never retained by them.)
    public init(copying template: borrowing HTTPHeaders, reservingBytes extraBytes: Int) {
        guard let copy = template.storage?.object.copy(reservingBytes: extraBytes) else {
            reserveCapacity(bytes: extraBytes)
            return
        }
        storage = SharedFieldBytes(object: copy)
    }

    /// How many fields there are.
    public var count: Int { storage?.object.counts.fields ?? 0 }

    public var isEmpty: Bool { count == 0 }

    /// Reserves room for `count` fields of a typical size (used when the count is known up front).
    public mutating func reserveCapacity(_ count: Int) { reserveCapacity(bytes: count * 48) }

    /// Reserves room for `bytes` bytes of fields.
    mutating func reserveCapacity(bytes: Int) {
        if let storage, storage.object.counts.room >= bytes { return }
        grow(to: bytes)
    }

    /// The first value for `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        var value: String?
        forEach(named: name) { bytes in
            value = String(decoding: bytes, as: UTF8.self)
            return false
        }
        return value
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        var values: [String] = []
        forEach(named: name) { bytes in
            values.append(String(decoding: bytes, as: UTF8.self))
            return true
        }
        return values
    }

    public func contains(_ name: String) -> Bool {
        var found = false
        forEach(named: name) { _ in
            found = true
            return false
        }
        return found
    }

    /// How many times `name` occurs (without building the values).
    public func count(of name: String) -> Int {
        var count = 0
        forEach(named: name) { _ in
            count += 1
            return true
        }
        return count
    }

    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { name in value.withUTF8 { value in append(name: name, value: value) } }
    }

    /// Adds a field whose value is given as UTF-8 bytes (a value built in a stack buffer, say).
    public mutating func add(_ name: String, utf8 value: UnsafeBufferPointer<UInt8>) {
        var name = name
        name.withUTF8 { name in append(name: name, value: value) }
    }

    /// Sets `name` to `value`, removing any existing value.
    public mutating func replace(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        guard contains(name) else { return }
        if !isKnownUniquelyReferenced(&storage!.object) { grow(to: storage!.object.counts.room) }
        var name = name
        name.withUTF8 { unwanted in
            storage!.object.withUnsafeMutablePointers { counts, bytes in
                // The fields kept slide down over the ones removed, in order.
                var read = 0
                var write = 0
                var removed = 0
                while read < counts.pointee.used {
                    let field = UnsafeRawPointer(bytes + read)
                    let nameLength = Int(field.loadUnaligned(as: UInt32.self))
                    let valueLength = Int(field.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                    let size = Self.prefixSize + nameLength + 1 + valueLength + 1
                    let fieldName = UnsafeBufferPointer(start: UnsafePointer(bytes + read + Self.prefixSize), count: nameLength)
                    if nameLength == unwanted.count && String.asciiCaseInsensitiveEquals(fieldName, unwanted) {
                        removed += 1
                    } else {
                        if write != read { memmove(bytes + write, bytes + read, size) }   // may overlap
                        write += size
                    }
                    read += size
                }
                counts.pointee.used = write
                counts.pointee.fields -= removed
            }
        }
    }

    public struct Iterator: IteratorProtocol {
        let storage: SharedFieldBytes?
        var offset = 0

        public mutating func next() -> (name: String, value: String)? {
            guard let storage = storage?.object, offset < storage.counts.used else { return nil }
            let field = storage.field(at: offset)
            offset = field.next
            return (String(decoding: field.name, as: UTF8.self), String(decoding: field.value, as: UTF8.self))
        }
    }

    public func makeIterator() -> Iterator { Iterator(storage: storage) }

    public var description: String {
        map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    // MARK: Storage

    /// Calls `body` with the value of each field named `name` (case-insensitively), in order,
    /// until it returns false.
    func forEach(named name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        guard storage != nil else { return }
        var name = name
        name.withUTF8 { wanted in storage?.object.forEachValue(named: wanted, body) }
    }

    /// Appends one field. Names and values are stored NUL-terminated for libmicrohttpd (which reads
    /// them with strlen, so a value holding a NUL ends there, as it would have anyway).
    mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        precondition(name.count <= Int(UInt32.max) && value.count <= Int(UInt32.max), "a header field larger than 4 GiB")
        let size = Self.prefixSize + name.count + 1 + value.count + 1
        let counts = storage?.object.counts ?? FieldBytes.Counts()
        if storage == nil || !isKnownUniquelyReferenced(&storage!.object) || counts.room < counts.used + size {
            grow(to: Swift.max(counts.used + size, counts.room * 2, 128))
        }
        storage!.object.withUnsafeMutablePointers { header, bytes in
            let field = UnsafeMutableRawPointer(bytes + header.pointee.used)
            field.storeBytes(of: UInt32(truncatingIfNeeded: name.count), as: UInt32.self)
            field.storeBytes(of: UInt32(truncatingIfNeeded: value.count), toByteOffset: 4, as: UInt32.self)
            let nameStart = field + Self.prefixSize
            if let base = name.baseAddress { nameStart.copyMemory(from: base, byteCount: name.count) }
            nameStart.storeBytes(of: 0, toByteOffset: name.count, as: UInt8.self)
            let valueStart = nameStart + name.count + 1
            if let base = value.baseAddress { valueStart.copyMemory(from: base, byteCount: value.count) }
            valueStart.storeBytes(of: 0, toByteOffset: value.count, as: UInt8.self)
            header.pointee.used += size
            header.pointee.fields += 1
        }
    }

    /// Appends a field from a name and value libmicrohttpd measured (raw bytes of its buffer).
    mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        append(name: name.assumingMemoryBound(to: UInt8.self), value: value.assumingMemoryBound(to: UInt8.self))
    }

    /// A storage of its own with room for `capacity` bytes, holding the fields so far.
    private mutating func grow(to capacity: Int) {
        storage = SharedFieldBytes(object: storage?.object.copy(capacity: capacity) ?? FieldBytes.make(capacity: capacity))
    }

    /// The name of the field at `index` (in order of addition).
    func name(at index: Int) -> String {
        var seen = 0
        for field in self {
            if seen == index { return field.name }
            seen += 1
        }
        return ""
    }

    /// Calls `body` with each field's name and value as C strings, in order.
    func forEachCString(_ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Void) {
        guard let storage = storage?.object else { return }
        var offset = 0
        let used = storage.counts.used
        while offset < used {
            let field = storage.field(at: offset)
            offset = field.next
            body(UnsafeRawPointer(field.name.baseAddress!).assumingMemoryBound(to: CChar.self),
                 UnsafeRawPointer(field.value.baseAddress!).assumingMemoryBound(to: CChar.self))
        }
    }
}

/// The bytes of an `HTTPHeaders`: `[name length][value length] name NUL value NUL` per field, the
/// lengths 32-bit in the machine's order, in one allocation with its counts in front.
/// An `HTTPHeaders`' storage, shared by the lists copied from it.
// @unchecked Sendable: the storage is written only through an `HTTPHeaders` that holds the only
// reference (`append` copies a shared one first), so a storage that two lists (or threads) share
// is only ever read.
struct SharedFieldBytes: @unchecked Sendable {
    var object: FieldBytes
}

final class FieldBytes: ManagedBuffer<FieldBytes.Counts, UInt8> {
    struct Counts {
        /// Bytes of fields stored.
        var used = 0
        /// Fields stored.
        var fields = 0
        /// Bytes there is room for (kept here: `ManagedBuffer.capacity` asks malloc each time).
        var room = 0
    }

    /// The counts, read without the exclusivity check a `header` access makes (which costs more
    /// than the rest of a lookup).
    var counts: Counts { withUnsafeMutablePointerToHeader { $0.pointee } }

    static func make(capacity: Int) -> FieldBytes {
        unsafeDowncast(FieldBytes.create(minimumCapacity: capacity) { _ in Counts(room: capacity) }, to: FieldBytes.self)
    }

    /// Calls `body` with the value of each field named `wanted` (case-insensitively), in order,
    /// until it returns false. (A method of the storage, so that `HTTPHeaders` calls it on the
    /// reference it holds, borrowed, instead of retaining a copy for each lookup.)
    func forEachValue(named wanted: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        withUnsafeMutablePointers { counts, bytes in
            // One pass over the raw bytes: a name of another length costs one load and a compare.
            let end = counts.pointee.used
            var offset = 0
            while offset < end {
                let field = UnsafeRawPointer(bytes + offset)
                let nameLength = Int(field.loadUnaligned(as: UInt32.self))
                let valueLength = Int(field.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                let nameStart = UnsafePointer(bytes + offset + HTTPHeaders.prefixSize)
                offset += HTTPHeaders.prefixSize + nameLength + 1 + valueLength + 1
                guard nameLength == wanted.count,
                      String.asciiCaseInsensitiveEquals(UnsafeBufferPointer(start: nameStart, count: nameLength), wanted)
                else { continue }
                if !body(UnsafeBufferPointer(start: nameStart + nameLength + 1, count: valueLength)) { return }
            }
        }
    }

    /// A storage of its own with these fields and room for `extraBytes` more. (A method of the
    /// storage, called on the reference the list holds, borrowed: see `forEachValue`.)
    func copy(reservingBytes extraBytes: Int) -> FieldBytes {
        copy(capacity: counts.used + extraBytes)
    }

    /// A storage of its own with these fields, with room for `capacity` bytes (at least those used).
    func copy(capacity: Int) -> FieldBytes {
        withUnsafeMutablePointers { counts, bytes in
            precondition(capacity >= counts.pointee.used, "a copy of \(counts.pointee.used) bytes of fields into \(capacity)")
            let copy = FieldBytes.make(capacity: capacity)
            copy.withUnsafeMutablePointers { newCounts, newBytes in
                newBytes.update(from: bytes, count: counts.pointee.used)
                newCounts.pointee.used = counts.pointee.used
                newCounts.pointee.fields = counts.pointee.fields
            }
            return copy
        }
    }

    /// The field starting at `offset`: its name and value (without their NULs) and where the next
    /// begins. The pointers stay valid while this storage lives and is not written.
    func field(at offset: Int) -> (name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, next: Int) {
        withUnsafeMutablePointerToElements { bytes in
            let field = UnsafeRawPointer(bytes + offset)
            let nameLength = Int(field.loadUnaligned(as: UInt32.self))
            let valueLength = Int(field.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            let nameStart = UnsafePointer(bytes + offset + HTTPHeaders.prefixSize)
            let valueStart = nameStart + nameLength + 1
            return (UnsafeBufferPointer(start: nameStart, count: nameLength),
                    UnsafeBufferPointer(start: valueStart, count: valueLength),
                    offset + HTTPHeaders.prefixSize + nameLength + 1 + valueLength + 1)
        }
    }
}

extension UnsafeRawBufferPointer {
    func assumingMemoryBound(to type: UInt8.Type) -> UnsafeBufferPointer<UInt8> {
        guard let base = baseAddress else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: count)
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
