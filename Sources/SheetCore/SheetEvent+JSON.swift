extension SheetEvent {
    /// The JSON that `encode(to:)` gives through a JSONEncoder (same members, same numbers),
    /// written directly. The durable archive stores one per change, and JSONEncoder's generic
    /// machinery was about 9% of a durable drag's CPU. CodableTests checks that the two agree.
    public var jsonText: String {
        var out = "{\"seq\":"
        out.reserveCapacity(192)
        out += String(seq)
        out += ",\"type\":"
        Self.appendString(kind.type.rawValue, to: &out)
        out += ",\"at\":"
        Self.appendString(at.rfc3339, to: &out)
        var members = Members(out: out)
        kind.writeMembers(to: &members)
        out = members.out
        if let gesture {
            out += ",\"gesture\":{\"releasedHeight\":"
            out += Self.number(gesture.releasedHeight)
            out += ",\"projectedHeight\":"
            out += Self.number(gesture.projectedHeight)
            Self.appendMember("target", gesture.target.description, to: &out)
            out += "}"
        }
        out += "}"
        return out
    }

    private struct Members: SheetEventMemberWriter {
        var out: String

        mutating func member(_ key: StaticString, string: String) {
            SheetEvent.appendMember(key.description, string, to: &out)
        }

        mutating func member(_ key: StaticString, integer: Int) {
            raw(key, String(integer))
        }

        mutating func member(_ key: StaticString, bool: Bool) {
            raw(key, bool ? "true" : "false")
        }

        mutating func member(_ key: StaticString, number: Double) {
            raw(key, SheetEvent.number(number))
        }

        mutating func member(_ key: StaticString, strings: [String]) {
            var list = "["
            for (index, string) in strings.enumerated() {
                if index > 0 { list += "," }
                SheetEvent.appendString(string, to: &list)
            }
            raw(key, list + "]")
        }

        private mutating func raw(_ key: StaticString, _ value: String) {
            out += ",\""
            out += key.description
            out += "\":"
            out += value
        }
    }

    private static func appendMember(_ key: String, _ value: String, to out: inout String) {
        out += ",\""
        out += key
        out += "\":"
        appendString(value, to: &out)
    }

    /// A JSON string as JSONEncoder writes it by default: `"`, `\` and `/` escaped, control
    /// characters as a \u escape of four hex digits (none of sheetd's names and detents has any).
    fileprivate static func appendString(_ text: String, to out: inout String) {
        out += "\""
        // The usual case, names, detents and timestamps, needs no escape: appended whole
        // (scalar by scalar was most of the cost of an event's text).
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "/") }) {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/": out += "\\/"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// `encodeNumber`'s choice (whole numbers as integers, non-finite as 0), then JSONEncoder's
    /// own text for a Double: its `description` without a trailing ".0".
    fileprivate static func number(_ value: Double) -> String {
        if !value.isFinite { return "0" }
        if abs(value) <= 9_007_199_254_740_992, Double(Int64(value)) == value { return String(Int64(value)) }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }
}
