import HTTPServer
import SessionStore

/// An `If-Match` or `If-None-Match` field (RFC 9110 §13.1.1, §13.1.2): `*`, or a list of entity
/// tags. sheetd's entity tags are strong, `"<version>"` in decimal; a tag of another shape is
/// well-formed but names no version. Empty list elements are skipped; at least one tag must be
/// there. openapi.yaml's `EntityTagList` pattern accepts exactly what `init?` accepts.
struct EntityTagCondition: Equatable {
    struct Tag: Equatable {
        var isWeak: Bool
        /// The text between the quotes.
        var opaque: Substring
    }

    /// `*`: any current version.
    var isAny: Bool
    var tags: [Tag]

    /// nil when the field is malformed.
    init?(_ text: String) {
        let trimmed = text.trimmingASCIIWhitespace()
        if trimmed == "*" {
            isAny = true
            tags = []
            return
        }
        isAny = false
        tags = []
        for element in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            var item = Substring(String(element).trimmingASCIIWhitespace())
            if item.isEmpty { continue }
            let isWeak = item.hasPrefix("W/")
            if isWeak { item = item.dropFirst(2) }
            guard item.utf8.count >= 2, item.utf8.first == UInt8(ascii: "\""), item.utf8.last == UInt8(ascii: "\"") else { return nil }
            let opaque = item.dropFirst().dropLast()
            // etagc: "!" and "#" to "~" (no quote, no space, no control).
            guard opaque.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x7E).contains($0) }) else { return nil }
            tags.append(Tag(isWeak: isWeak, opaque: opaque))
        }
        if tags.isEmpty { return nil }
    }

    /// The versions named by strong tags: what `If-Match`'s strong comparison can match.
    var strongVersions: AcceptedVersions {
        AcceptedVersions(tags.compactMap { $0.isWeak ? nil : Self.version(in: $0.opaque) })
    }

    /// `If-None-Match`'s weak comparison against the current version: `*` or any tag, weak or not.
    func matchesWeakly(_ version: UInt64) -> Bool {
        isAny || tags.contains { Self.version(in: $0.opaque) == version }
    }

    /// The version an opaque tag names if it is exactly how sheetd writes one.
    private static func version(in opaque: Substring) -> UInt64? {
        guard let value = UInt64(opaque), String(value) == opaque else { return nil }
        return value
    }
}

extension HTTPHeaders {
    /// Adds `ETag: "<version>"`, the strong tag `EntityTagCondition` reads back. Every action's
    /// answer carries one, so its digits go into a stack buffer rather than an interpolated String.
    mutating func addEntityTag(version: UInt64) {
        // Two quotes around at most 20 digits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 22) { buffer in
            var start = buffer.count - 1
            buffer[start] = UInt8(ascii: "\"")
            var rest = version
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            start -= 1
            buffer[start] = UInt8(ascii: "\"")
            add("ETag", utf8: UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }
}
