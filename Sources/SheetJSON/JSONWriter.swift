import SheetCore

/// Writes JSON straight into a byte buffer. Answers are built on the hot path of every request,
/// so this avoids Foundation's encoder (and its dictionaries) entirely.
///
/// The buffer is raw memory (hence `~Copyable`): a write is a bounds check and a store, without
/// the uniqueness check and header updates each `Array.append` makes. Either the writer owns
/// it (freed in `deinit`) and `bytes` copies the result out once, or `JSONWriter.bytes(capacity:_:)`
/// lends it the storage of the array it returns, so the answer is written in place.
public struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    /// Whether `base` is the writer's own, to free (else it is lent, until the writer outgrows it).
    private var ownsBuffer: Bool
    /// Whether the next member or element needs a comma before it.
    private var needsComma = false
    /// The last timestamp `timestamp` formatted: its instant, its day and where its text starts.
    private var lastTimestamp: (instant: Int64, day: Int64, start: Int)?

    public init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
        ownsBuffer = true
    }

    /// Writes into `buffer`, which stays the caller's.
    private init(lending buffer: UnsafeMutableBufferPointer<UInt8>) {
        base = buffer.baseAddress!
        capacity = buffer.count
        ownsBuffer = false
    }

    deinit { if ownsBuffer { base.deallocate() } }

    /// What `render` writes, written straight into the returned array's storage of `capacity`
    /// bytes: no buffer of the writer's own and no copy, unless the text outgrows it. A capacity
    /// of at most `pooledCapacity` keeps the array in glibc's per-thread cache of small blocks.
    public static func bytes(capacity: Int = pooledCapacity, _ render: (inout JSONWriter) -> Void) -> [UInt8] {
        // Copied from zeros rather than `init(unsafeUninitializedCapacity:)` or
        // `init(repeating:count:)`, whose allocation is never specialised and looks the array's
        // storage type up at run time (360 instructions): zeroing a kilobyte costs a fifth of that.
        var written = [UInt8](repeatElement(0, count: max(capacity, 16)))
        var outgrown: [UInt8]?
        let count = written.withUnsafeMutableBufferPointer { buffer in
            var writer = JSONWriter(lending: buffer)
            render(&writer)
            if writer.ownsBuffer {
                // Outgrown: the text moved to a buffer of the writer's own; copied out once.
                outgrown = writer.bytes
                return 0
            }
            return writer.count
        }
        if let outgrown { return outgrown }
        written.removeLast(written.count - count)
        return written
    }

    /// An array capacity whose block (with the array's 32-byte header, 992 bytes) glibc's malloc
    /// serves from its per-thread cache, and when that is empty from a small bin. One more
    /// kilobyte would make it a large-bin request, which first merges every freed fast chunk
    /// (`malloc_consolidate`): once per answer when the writer thread of a durable store frees
    /// what request threads allocated.
    public static let pooledCapacity = 960

    /// What was written, as an array.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }
    /// How many bytes were written.
    var byteCount: Int { count }
    /// What was written from `start` on.
    func bytes(from start: Int) -> [UInt8] { Array(UnsafeBufferPointer(start: base + start, count: count - start)) }

    /// What was written, as text (for a database column).
    public var text: String { String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) }

    public mutating func beginObject() { separate(); put(UInt8(ascii: "{")); needsComma = false }
    public mutating func endObject() { put(UInt8(ascii: "}")); needsComma = true }
    public mutating func beginArray() { separate(); put(UInt8(ascii: "[")); needsComma = false }
    public mutating func endArray() { put(UInt8(ascii: "]")); needsComma = true }

    /// Starts a member: `"key":`. The value written next belongs to it. Inlined, so the copy's
    /// length is known where it is written.
    @inline(__always)
    public mutating func key(_ key: StaticString) {
        separate()
        reserve(key.utf8CodeUnitCount + 3)
        base[count] = UInt8(ascii: "\"")
        (base + count + 1).update(from: key.utf8Start, count: key.utf8CodeUnitCount)
        count += key.utf8CodeUnitCount + 1
        base[count] = UInt8(ascii: "\"")
        base[count + 1] = UInt8(ascii: ":")
        count += 2
        needsComma = false
    }

    /// Starts a member the caller spells out whole, separator included: `member(#","version":"#)`.
    /// The renderers of fixed shapes use it: one copy instead of a comma check and four writes
    /// (inlined, so the copy's length is known where it is written).
    @inline(__always)
    public mutating func member(_ literal: StaticString) {
        put(literal)
        needsComma = false
    }

    public mutating func string(_ value: String) {
        separate()
        appendQuoted(value)
        needsComma = true
    }

    /// A string the caller knows needs no escaping (enum names, detents): copied without the
    /// per-byte scan. Debug builds (the tests) check the claim.
    public mutating func plainString(_ value: String) {
        separate()
        let copied: Void? = value.utf8.withContiguousStorageIfAvailable { utf8 in
            assert(!utf8.contains(where: Self.needsEscape), "plainString(\(value)) needs escaping")
            put(UInt8(ascii: "\""))
            put(utf8)
            put(UInt8(ascii: "\""))
        }
        if copied == nil { appendQuoted(value) }
        needsComma = true
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x22 || byte == 0x5C || byte == 0x7F
    }

    /// A value spelled out whole as a literal (a name with its quotes): one copy.
    @inline(__always)
    mutating func quoted(_ literal: StaticString) {
        separate()
        put(literal)
        needsComma = true
    }

    public mutating func null() { separate(); put("null"); needsComma = true }
    public mutating func bool(_ value: Bool) { separate(); put(value ? "true" : "false"); needsComma = true }

    public mutating func integer<T: BinaryInteger>(_ value: T) {
        separate()
        if let small = Int64(exactly: value) {
            putDigits(small)
        } else {
            append(String(value))
        }
        needsComma = true
    }

    /// Whole numbers print without a fraction (844, not 844.0); others as Swift's shortest round-trip form.
    public mutating func number(_ value: Double) {
        separate()
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
            putDigits(Int64(value))
        } else {
            append(JSONWriter.format(value))
        }
        needsComma = true
    }

    /// A string value of exactly `length` bytes that `write` fills in: for ids and timestamps,
    /// which are ASCII needing no escaping, written without making a String first.
    public mutating func unescapedString(length: Int, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Void) {
        separate()
        reserve(length + 2)
        base[count] = UInt8(ascii: "\"")
        write(UnsafeMutableBufferPointer(start: base + count + 1, count: length))
        base[count + 1 + length] = UInt8(ascii: "\"")
        count += length + 2
        needsComma = true
    }

    /// A timestamp as `rfc3339` writes it. An answer's timestamps are mostly of one day and often
    /// of one instant (`updatedAt` and its event's `at`): the text of the same instant is copied
    /// from the last one, and of the same day only its time is formatted.
    public mutating func timestamp(_ timestamp: Timestamp) {
        separate()
        reserve(Timestamp.rfc3339Length + 2)
        base[count] = UInt8(ascii: "\"")
        let start = count + 1
        let instant = timestamp.millisecondsSince1970
        if let last = lastTimestamp, last.instant == instant {
            (base + start).update(from: base + last.start, count: Timestamp.rfc3339Length)
        } else {
            let (day, millisecond) = timestamp.rfc3339Parts
            if let last = lastTimestamp, last.day == day {
                (base + start).update(from: base + last.start, count: Timestamp.rfc3339DateLength)
            } else {
                Timestamp.writeRFC3339Date(day: day, into: base + start)
            }
            Timestamp.writeRFC3339Time(millisecond: millisecond, into: base + start + Timestamp.rfc3339DateLength)
            lastTimestamp = (instant, day, start)
        }
        base[start + Timestamp.rfc3339Length] = UInt8(ascii: "\"")
        count = start + Timestamp.rfc3339Length + 1
        needsComma = true
    }

    public static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 1e15 {
            return String(Int64(value))
        }
        return value.description
    }

    /// Appends bytes that are already JSON (a pre-rendered value).
    public mutating func raw(_ json: [UInt8]) {
        separate()
        json.withUnsafeBufferPointer { put($0) }
        needsComma = true
    }

    /// Appends members already rendered, separators included (`,"a":1,"b":2`), after a value.
    mutating func append(_ members: [UInt8]) {
        members.withUnsafeBufferPointer { put($0) }
    }

    // MARK: Buffer

    /// Makes room for `extra` more bytes, doubling as needed.
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        if ownsBuffer { base.deallocate() }
        base = newBase
        capacity = newCapacity
        ownsBuffer = true
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    /// Most copies are a member name or an enum's name, a few bytes: those are copied here
    /// with two overlapping 8-byte (or 4-byte) moves instead of a call to memcpy.
    @inline(__always)
    private mutating func put(_ buffer: UnsafeBufferPointer<UInt8>) {
        guard let source = buffer.baseAddress else { return }
        let n = buffer.count
        reserve(n)
        let destination = UnsafeMutableRawPointer(base + count)
        let from = UnsafeRawPointer(source)
        switch n {
        case 0:
            return
        case 1...3:
            destination.storeBytes(of: source[0], as: UInt8.self)
            destination.storeBytes(of: source[n / 2], toByteOffset: n / 2, as: UInt8.self)
            destination.storeBytes(of: source[n - 1], toByteOffset: n - 1, as: UInt8.self)
        case 4...7:
            let head = from.loadUnaligned(as: UInt32.self)
            let tail = from.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
            destination.storeBytes(of: head, as: UInt32.self)
            destination.storeBytes(of: tail, toByteOffset: n - 4, as: UInt32.self)
        case 8...16:
            let head = from.loadUnaligned(as: UInt64.self)
            let tail = from.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            destination.storeBytes(of: head, as: UInt64.self)
            destination.storeBytes(of: tail, toByteOffset: n - 8, as: UInt64.self)
        default:
            destination.copyMemory(from: from, byteCount: n)
        }
        count += n
    }

    @inline(__always)
    private mutating func put(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func separate() {
        if needsComma { put(UInt8(ascii: ",")) }
    }

    /// Decimal digits of `value`, written back to front into their final place.
    private mutating func putDigits(_ value: Int64) {
        if value < 0 { put(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits = 1
        var bound: UInt64 = 10
        while digits < 20 && magnitude >= bound {
            digits += 1
            bound = bound &* 10
        }
        reserve(digits)
        var index = count + digits
        repeat {
            index -= 1
            base[index] = UInt8(truncatingIfNeeded: 48 + magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        count += digits
    }

    private mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { put($0) }
    }

    private mutating func appendQuoted(_ value: String) {
        put(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Most strings here (detents, enum values, messages) need no escaping: copy them in one go.
            if !utf8.contains(where: Self.needsEscape) {
                put(utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): put(UInt8(ascii: "\\")); put(byte)
                case UInt8(ascii: "\\"): put(UInt8(ascii: "\\")); put(byte)
                case 0x0A: put(UInt8(ascii: "\\")); put(UInt8(ascii: "n"))
                case 0x0D: put(UInt8(ascii: "\\")); put(UInt8(ascii: "r"))
                case 0x09: put(UInt8(ascii: "\\")); put(UInt8(ascii: "t"))
                case 0x00..<0x20, 0x7F:
                    let hex: StaticString = "0123456789abcdef"
                    put("\\u00")
                    put(hex.utf8Start[Int(byte >> 4)])
                    put(hex.utf8Start[Int(byte & 0xF)])
                default: put(byte)
                }
            }
        }
        put(UInt8(ascii: "\""))
    }
}
