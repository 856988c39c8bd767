/// Reads the bodies nearly every request sends — one object of a few members, each a plain ASCII
/// string, a short decimal, `true`, `false`, `null` or an array of those (a creation's
/// `detents`) — without jansson, whose parse and tree cost several times the few bytes of such
/// a body.
///
/// It is strict and declines (returns nil) anything it is not sure to read exactly as jansson and
/// `JSONParser`'s conversion would: escapes, bytes outside printable ASCII, deeper nesting, exponents,
/// numbers of more than 15 digits, duplicate keys, more than `maximumMembers` members, anything
/// malformed. A declined body goes to jansson, which gives the value or the error it always gave;
/// so this reader never produces an error of its own.
///
/// It reads a body into `FlatObject`, where each member is a span of the body (a request's
/// decoder then makes Strings of only the values it takes), and makes `JSONValue`s from those.
enum FlatObjectReader {
    /// Members of an object (kept inline in `FlatObject`): more than any route but a creation
    /// with every field takes. Bodies with more go to jansson.
    static let maximumMembers = 8
    /// Elements of an array (read again when taken, so not kept).
    static let maximumElements = 16
    /// Significant digits a number may have here: below 10^15, it is exact as a Double.
    static let maximumDigits = 15
    /// Longer bodies go to jansson (a key's length is kept in 16 bits).
    static let maximumLength = Int(UInt16.max)

    /// Reads `body` into `object`, the members where they are in it; false to decline.
    static func read(_ body: UnsafeBufferPointer<UInt8>, into object: inout FlatObject) -> Bool {
        guard let base = body.baseAddress, body.count <= maximumLength else { return false }
        var cursor = Cursor(base: base, end: body.count)
        return cursor.object(into: &object)
    }

    /// The members in document order, or nil to decline.
    static func members(of body: UnsafeBufferPointer<UInt8>) -> [(key: String, value: JSONValue)]? {
        var object = FlatObject()
        guard read(body, into: &object) else { return nil }
        var members: [(key: String, value: JSONValue)] = []
        members.reserveCapacity(object.count)
        for index in 0..<object.count {
            let member = object.members[index]
            members.append((key(member, in: body), value(member, in: body)))
        }
        return members
    }

    /// The text of `count` bytes of `body` from `start` (ASCII, as the reader accepted it).
    static func text(_ start: UInt32, _ count: Int, in body: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: body[Int(start)..<Int(start) + count]), as: UTF8.self)
    }

    static func key(_ member: FlatMember, in body: UnsafeBufferPointer<UInt8>) -> String {
        text(member.keyStart, Int(member.keyCount), in: body)
    }

    /// The number of a member of kind `.number`, read again from its text.
    static func number(_ member: FlatMember, in body: UnsafeBufferPointer<UInt8>) -> Double {
        var cursor = Cursor(base: body.baseAddress!, end: body.count, index: Int(member.valueStart))
        return cursor.number() ?? .nan
    }

    /// The value the reader found, as jansson's tree converts it.
    static func value(_ member: FlatMember, in body: UnsafeBufferPointer<UInt8>) -> JSONValue {
        switch member.kind {
        case .string: return .string(text(member.valueStart, Int(member.valueCount), in: body))
        case .number: return .number(number(member, in: body))
        case .true: return .bool(true)
        case .false: return .bool(false)
        case .null: return .null
        case .array:
            // Read again, element by element: the reader checked it whole already.
            var cursor = Cursor(base: body.baseAddress!, end: body.count, index: Int(member.valueStart) + 1)
            var items: [JSONValue] = []
            while let item = cursor.nextElement() {
                switch item.kind {
                case .string: items.append(.string(text(UInt32(truncatingIfNeeded: item.start), item.count, in: body)))
                case .number: items.append(.number(item.number))
                case .true: items.append(.bool(true))
                case .false: items.append(.bool(false))
                case .null: items.append(.null)
                case .array: break   // never inside an array: the reader declines nesting
                }
            }
            return .array(items)
        }
    }

    /// 10^0 through 10^15, each exact in a Double.
    private static let powersOfTen: (Double, Double, Double, Double, Double, Double, Double, Double,
                                     Double, Double, Double, Double, Double, Double, Double, Double) =
        (1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15)

    private static func powerOfTen(_ exponent: Int) -> Double {
        withUnsafeBytes(of: powersOfTen) { $0.load(fromByteOffset: exponent &* 8, as: Double.self) }
    }

    private struct Cursor {
        let base: UnsafePointer<UInt8>
        let end: Int
        var index: Int

        init(base: UnsafePointer<UInt8>, end: Int, index: Int = 0) {
            self.base = base
            self.end = end
            self.index = index
        }

        /// The byte at the cursor, or 0 past the end (0 is never valid where a byte is expected,
        /// so running off the end declines like any other unexpected byte).
        @inline(__always)
        private var byte: UInt8 { index < end ? base[index] : 0 }

        /// JSON's whitespace (RFC 8259: space, tab, line feed, carriage return), as jansson skips it.
        @inline(__always)
        private mutating func skipWhitespace() {
            while index < end {
                switch base[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func object(into object: inout FlatObject) -> Bool {
            skipWhitespace()
            guard byte == UInt8(ascii: "{") else { return false }
            index += 1
            skipWhitespace()
            if byte == UInt8(ascii: "}") {
                index += 1
            } else {
                while true {
                    guard byte == UInt8(ascii: "\""), let key = string() else { return false }
                    // jansson refuses a repeated key (JSON_REJECT_DUPLICATES): let it say so.
                    for other in 0..<object.count where same(object.members[other], key) { return false }
                    skipWhitespace()
                    guard byte == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipWhitespace()
                    guard let value = value() else { return false }
                    object.members[object.count] = FlatMember(
                        keyStart: UInt32(truncatingIfNeeded: key.start), valueStart: UInt32(truncatingIfNeeded: value.start),
                        valueCount: UInt32(truncatingIfNeeded: value.count), keyCount: UInt16(truncatingIfNeeded: key.count), kind: value.kind)
                    object.count += 1
                    skipWhitespace()
                    if byte == UInt8(ascii: ",") {
                        guard object.count < FlatObjectReader.maximumMembers else { return false }
                        index += 1
                        skipWhitespace()
                    } else if byte == UInt8(ascii: "}") {
                        index += 1
                        break
                    } else {
                        return false
                    }
                }
            }
            skipWhitespace()
            return index == end
        }

        private func same(_ member: FlatMember, _ key: Span) -> Bool {
            guard Int(member.keyCount) == key.count else { return false }
            for offset in 0..<key.count where base[Int(member.keyStart) + offset] != base[key.start + offset] { return false }
            return true
        }

        /// Where a value is: a string's text without its quotes, a number's text, an array from
        /// its `[` through its `]`; and a number's value.
        struct Span {
            var kind: FlatMember.Kind
            var start = 0
            var count = 0
            var number: Double = 0
        }

        private mutating func value() -> Span? {
            if byte == UInt8(ascii: "[") { return array() }
            return scalar()
        }

        /// An array of scalars; the cursor is on its bracket.
        private mutating func array() -> Span? {
            let start = index
            index += 1
            skipWhitespace()
            var count = 0
            if byte != UInt8(ascii: "]") {
                while true {
                    guard scalar() != nil else { return nil }
                    count += 1
                    skipWhitespace()
                    if byte == UInt8(ascii: ",") {
                        guard count < FlatObjectReader.maximumElements else { return nil }
                        index += 1
                        skipWhitespace()
                    } else if byte == UInt8(ascii: "]") {
                        break
                    } else {
                        return nil
                    }
                }
            }
            index += 1
            return Span(kind: .array, start: start, count: index - start)
        }

        /// The next element of an array the reader accepted, the cursor after its bracket or an
        /// element; nil at its end.
        mutating func nextElement() -> Span? {
            skipWhitespace()
            if byte == UInt8(ascii: ",") { index += 1; skipWhitespace() }
            return scalar()
        }

        private mutating func scalar() -> Span? {
            let start = index
            switch byte {
            case UInt8(ascii: "\""):
                return string()
            case UInt8(ascii: "t"):
                return literal("true") ? Span(kind: .true) : nil
            case UInt8(ascii: "f"):
                return literal("false") ? Span(kind: .false) : nil
            case UInt8(ascii: "n"):
                return literal("null") ? Span(kind: .null) : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return number().map { Span(kind: .number, start: start, count: index - start, number: $0) }
            default:
                return nil
            }
        }

        /// A string of printable ASCII (0x20 to 0x7F) without escapes; the cursor is on its quote.
        private mutating func string() -> Span? {
            let start = index + 1
            var position = start
            while position < end {
                let character = base[position]
                if character == UInt8(ascii: "\"") {
                    index = position + 1
                    return Span(kind: .string, start: start, count: position - start)
                }
                // A control character (jansson's error), a backslash or a byte past ASCII: decline.
                guard character &- 0x20 < 0x60, character != UInt8(ascii: "\\") else { return nil }
                position += 1
            }
            return nil
        }

        /// `true`, `false` or `null`, followed by what may follow a value (else jansson says what is wrong).
        private mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard end - index >= count else { return false }
            for offset in 0..<count where base[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with at most `maximumDigits` digits in all: the mantissa
        /// and the power of ten dividing it are exact Doubles, so one IEEE division rounds the
        /// value exactly as strtod (jansson's conversion, under JSON_DECODE_INT_AS_REAL) does.
        /// Exponents, leading zeros and longer numbers decline.
        mutating func number() -> Double? {
            let negative = byte == UInt8(ascii: "-")
            if negative { index += 1 }
            var mantissa: UInt64 = 0
            var digits = 0
            var fractionDigits = 0
            let first = byte
            guard first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return nil }
            if first == UInt8(ascii: "0") {
                index += 1
                digits = 1
            } else {
                while index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") {
                    mantissa = mantissa &* 10 &+ UInt64(base[index] &- UInt8(ascii: "0"))
                    digits += 1
                    index += 1
                    guard digits <= FlatObjectReader.maximumDigits else { return nil }
                }
            }
            if byte == UInt8(ascii: ".") {
                index += 1
                while index < end, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") {
                    mantissa = mantissa &* 10 &+ UInt64(base[index] &- UInt8(ascii: "0"))
                    digits += 1
                    fractionDigits += 1
                    index += 1
                    guard digits <= FlatObjectReader.maximumDigits else { return nil }
                }
                guard fractionDigits > 0 else { return nil }
            }
            // Only what may end a value: whitespace, ',', '}' or ']' (an 'e', a second '.', a
            // digit after a leading zero all decline).
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"): break
            default: return nil
            }
            var value = Double(mantissa)
            if fractionDigits > 0 { value /= FlatObjectReader.powerOfTen(fractionDigits) }
            return negative ? -value : value
        }
    }
}

/// One member as `FlatObjectReader` found it: where its key and its value are in the body.
/// Sixteen bytes, so a whole `FlatObject` is a few cache lines to copy.
struct FlatMember {
    enum Kind: UInt8 { case string, number, `true`, `false`, null, array }
    var keyStart: UInt32
    /// A string's text without its quotes, a number's text, an array from `[` through `]`.
    var valueStart: UInt32
    var valueCount: UInt32
    var keyCount: UInt16
    var kind: Kind
}

/// The members of a flat object, in document order, kept inline (no allocation).
struct FlatObject {
    var count = 0
    var members = InlineArray<8, FlatMember>(repeating: FlatMember(keyStart: 0, valueStart: 0, valueCount: 0, keyCount: 0, kind: .null))
}
