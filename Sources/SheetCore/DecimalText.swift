/// The strict number grammar of detent strings, and the canonical way numbers are printed.
///
/// `Double(String)` alone accepts far too much (`nan`, `inf`, `0x1p3`, signs, `5.`), so the text is
/// checked against a small grammar first and only then handed to `Double(String)`:
///
///     number   = digits [ "." digits ] [ exponent ]    ; "300", "300.0"
///              | "." digits [ exponent ]               ; ".5"
///     exponent = ( "e" | "E" ) [ "+" | "-" ] digits    ; "3e2", "1e-05", "1e+20"
///
/// Decision: a dangling point (`5.`) is rejected — it is almost always a typo, and no canonical
/// form ever prints it. Upper-case `E` is accepted: it is the same number, and only the *kind*
/// (`height`, `fraction`) has to be lower case. The exponent may carry a sign because canonical
/// output uses one (`1e-05`, `1e+20`), and every canonical string must parse back.
enum DecimalText {
    enum Verdict {
        case number(Double)
        case negative(Double)   // a valid number behind a leading "-": answered as out of range
        case malformed
    }

    static func read(_ text: Substring.UTF8View) -> Verdict {
        var bytes = text[...]
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        }
        guard isWellFormed(bytes), let value = Double(String(decoding: bytes, as: UTF8.self)) else {
            return .malformed
        }
        return negative ? .negative(value) : .number(value)
    }

    static func isWellFormed(_ bytes: Substring.UTF8View.SubSequence) -> Bool {
        var i = bytes.startIndex
        let end = bytes.endIndex
        func isDigit(_ b: UInt8) -> Bool { b >= 48 && b <= 57 }
        func digits() -> Int {
            var n = 0
            while i != end, isDigit(bytes[i]) { n += 1; i = bytes.index(after: i) }
            return n
        }
        let whole = digits()
        var fraction = 0
        var hasPoint = false
        if i != end, bytes[i] == UInt8(ascii: ".") {
            hasPoint = true
            i = bytes.index(after: i)
            fraction = digits()
        }
        guard whole + fraction > 0, !hasPoint || fraction > 0 else { return false }
        if i != end, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i = bytes.index(after: i)
            if i != end, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") {
                i = bytes.index(after: i)
            }
            guard digits() > 0 else { return false }
        }
        return i == end
    }

    /// `Double.description` without a trailing ".0": the shortest text that round-trips.
    static func canonical(_ value: Double) -> String {
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }
}
