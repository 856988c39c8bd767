/// One line of the keys file: `<tenant> <role> <sha256 of the key, hex>`.
public struct KeyEntry: Sendable {
    public let tenant: String
    public let role: Role
    public let digest: KeyDigest
    /// Where it was written, for messages.
    public let line: Int
}

/// A keys file that cannot be used, and the line that says why.
public struct KeyFileError: Error, Sendable {
    public let line: Int
    public let message: String

    public var description: String { line > 0 ? "line \(line): \(message)" : message }
}

/// The keys file. One key per line as `<tenant> <role> <sha256-hex>`; fields are separated by
/// spaces or tabs; blank lines and lines whose first visible character is `#` are ignored, as is
/// a `#` comment after the three fields. The file holds digests only, never a key.
public enum KeyFile {
    /// Tenant names: 1–64 of `A-Z a-z 0-9 . _ -` (they appear in logs and metrics labels).
    public static func isValidTenant(_ name: Substring) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    public static func parse(_ text: String) throws(KeyFileError) -> [KeyEntry] {
        var entries: [KeyEntry] = []
        var number = 0
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if let comment = fields.firstIndex(where: { $0.hasPrefix("#") }) { fields.removeSubrange(comment...) }
            if fields.isEmpty { continue }
            guard fields.count == 3 else {
                throw KeyFileError(line: number, message: "expected \"<tenant> <role> <sha256-hex>\", found \(fields.count) field\(fields.count == 1 ? "" : "s")")
            }
            guard isValidTenant(fields[0]) else {
                throw KeyFileError(line: number, message: "tenant \"\(fields[0].prefix(80))\" must be 1 to 64 of A-Z a-z 0-9 . _ -")
            }
            guard let role = Role(rawValue: String(fields[1])) else {
                throw KeyFileError(line: number, message: "role \"\(fields[1].prefix(80))\" must be one of app, observer, operator")
            }
            guard fields[2].utf8.count == 2 * SHA256.digestLength, let bytes = Hex.decode(fields[2]) else {
                throw KeyFileError(line: number, message: "the third field must be the key's SHA-256 as 64 hex digits (the file never holds a key itself; `sheetd keys new` prints the line)")
            }
            let digest = KeyDigest(bytes)
            if let earlier = entries.first(where: { $0.digest.matches(digest) }) {
                throw KeyFileError(line: number, message: "the same key is already listed on line \(earlier.line)")
            }
            entries.append(KeyEntry(tenant: String(fields[0]), role: role, digest: digest, line: number))
        }
        return entries
    }
}
