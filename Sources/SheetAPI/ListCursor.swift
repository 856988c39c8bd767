/// The opaque `next` cursor of `GET /sessions`: a creation ordinal, in base 36 behind a prefix so
/// it is visibly not a session id.
package enum ListCursor {
    package static func encode(_ ordinal: UInt64) -> String { "c" + String(ordinal, radix: 36) }

    package static func decode(_ text: String) -> UInt64? {
        // At most 12 digits (36^12 < 2^64), as openapi.yaml's pattern says.
        guard text.hasPrefix("c"), text.count > 1, text.count <= 13 else { return nil }
        let digits = text.dropFirst()
        guard digits.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) }) else { return nil }
        return UInt64(digits, radix: 36)
    }
}
