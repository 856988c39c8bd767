/// Reads the bodies nearly every request sends — one object of a few members, each a plain ASCII
/// string, a short decimal, `true`, `false`, `null` or an array of those (a creation's
/// `detents`) — without jansson, whose parse and tree cost
/// several times the few bytes of such a body.
///
/// It is strict and declines (returns nil) anything it is not sure to read exactly as jansson and
/// `JSONParser`'s conversion would: escapes, bytes outside printable ASCII, deeper nesting, exponents,
/// numbers of more than 15 digits, duplicate keys, more than `maximumMembers` members, anything
/// malformed. A declined body goes to jansson, which gives the value or the error it always gave;
/// so this reader never produces an error of its own.
enum FlatObjectReader {
    /// More members (or array elements) than any route takes: bodies with more go to jansson.
    static let maximumMembers = 16
    /// Significant digits a number may have here: below 10^15, it is exact as a Double.
    static let maximumDigits = 15

    /// The members in document order, or nil to decline.
    static func members(of body: UnsafeBufferPointer<UInt8>) -> [(key: String, value: JSONValue)]? {
        guard let base = body.baseAddress else { return nil }
        var reader = Cursor(base: base, end: body.count)
        return reader.object()
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
        var index = 0

        init(base: UnsafePointer<UInt8>, end: Int) {
            self.base = base
            self.end = end
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

        mutating func object() -> [(key: String, value: JSONValue)]? {
            skipWhitespace()
            guard byte == UInt8(ascii: "{") else { return nil }
            index += 1
            skipWhitespace()
            var members: [(key: String, value: JSONValue)] = []
            if byte == UInt8(ascii: "}") {
                index += 1
            } else {
                members.reserveCapacity(4)
                while true {
                    guard byte == UInt8(ascii: "\""), let key = string() else { return nil }
                    // jansson refuses a repeated key (JSON_REJECT_DUPLICATES): let it say so.
                    for member in members where member.key == key { return nil }
                    skipWhitespace()
                    guard byte == UInt8(ascii: ":") else { return nil }
                    index += 1
                    skipWhitespace()
                    guard let value = value() else { return nil }
                    members.append((key, value))
                    skipWhitespace()
                    if byte == UInt8(ascii: ",") {
                        guard members.count < FlatObjectReader.maximumMembers else { return nil }
                        index += 1
                        skipWhitespace()
                    } else if byte == UInt8(ascii: "}") {
                        index += 1
                        break
                    } else {
                        return nil
                    }
                }
            }
            skipWhitespace()
            return index == end ? members : nil
        }

        private mutating func value() -> JSONValue? {
            if byte == UInt8(ascii: "[") { return array() }
            return scalar()
        }

        /// An array of scalars; the cursor is on its bracket.
        private mutating func array() -> JSONValue? {
            index += 1
            skipWhitespace()
            var items: [JSONValue] = []
            if byte == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                guard let item = scalar() else { return nil }
                items.append(item)
                skipWhitespace()
                if byte == UInt8(ascii: ",") {
                    guard items.count < FlatObjectReader.maximumMembers else { return nil }
                    index += 1
                    skipWhitespace()
                } else if byte == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                } else {
                    return nil
                }
            }
        }

        private mutating func scalar() -> JSONValue? {
            switch byte {
            case UInt8(ascii: "\""):
                return string().map(JSONValue.string)
            case UInt8(ascii: "t"):
                return literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f"):
                return literal("false") ? .bool(false) : nil
            case UInt8(ascii: "n"):
                return literal("null") ? .null : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return number()
            default:
                return nil
            }
        }

        /// A string of printable ASCII (0x20 to 0x7F) without escapes; the cursor is on its quote.
        private mutating func string() -> String? {
            let start = index + 1
            var position = start
            while position < end {
                let character = base[position]
                if character == UInt8(ascii: "\"") {
                    index = position + 1
                    return String(decoding: UnsafeBufferPointer(start: base + start, count: position - start), as: UTF8.self)
                }
                // A control character (jansson's error), a backslash or a byte past ASCII: decline.
                guard character >= 0x20, character < 0x80, character != UInt8(ascii: "\\") else { return nil }
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
        private mutating func number() -> JSONValue? {
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
            return .number(negative ? -value : value)
        }
    }
}
