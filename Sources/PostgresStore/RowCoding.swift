import Foundation
import SessionStore
import SheetCore
import SheetJSON

/// How values are spelled as PostgreSQL text, both ways. Sessions and events are written by the
/// API's renderer (a session row's `sheet` is the session's answer with its newest event beside
/// it, the rest live in `events`) and read back by SheetCore's `Decodable`. One coder per
/// committer thread (the Foundation decoder is not shared between threads).
struct RowCoding {
    private let decoder = JSONDecoder()

    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    func text(of sheet: Sheet, id: SessionID) -> String {
        Rendering.storedSessionText(SessionSnapshot(id: id, sheet: sheet), retained: 1)
    }

    func sheet(_ text: String, id: String) throws(Unreadable) -> Sheet {
        do {
            return try decoder.decode(Sheet.self, from: Data(text.utf8))
        } catch {
            throw Unreadable(description: "session \(id) in the database cannot be read: \(error)")
        }
    }

    func text(of event: SheetEvent) -> String {
        Rendering.eventText(event)
    }

    func event(_ text: String) throws(Unreadable) -> SheetEvent {
        do {
            return try decoder.decode(SheetEvent.self, from: Data(text.utf8))
        } catch {
            throw Unreadable(description: "an event in the database cannot be read: \(error)")
        }
    }

    /// A `text[]` literal: every element quoted, `"` and `\` escaped.
    static func array(_ values: [String]) -> String {
        var literal = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { literal += "," }
            literal += "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }

    /// A fingerprint half: the 64 bits as PostgreSQL's signed bigint.
    static func signed(_ value: UInt64) -> String { String(Int64(bitPattern: value)) }

    static func unsigned(_ text: String?) -> UInt64 { UInt64(bitPattern: Int64(text ?? "") ?? 0) }

    static func integer(_ text: String?) -> Int64 { Int64(text ?? "") ?? 0 }

    /// Stored answer headers, one `name: value` a line (header values hold no line breaks).
    static func text(of headers: [String: String]) -> String {
        headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
    }

    static func headers(_ text: String) -> [String: String] {
        var headers: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[String(line[..<colon])] = String(line[line.index(after: colon)...].dropFirst())
        }
        return headers
    }

    /// `bytea` in PostgreSQL's hex format, `\x` then two digits a byte.
    static func bytea(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = [0x5C, 0x78]
        text.reserveCapacity(2 + bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    static func bytes(_ text: String) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == 0x5C, utf8[1] == 0x78 else { return utf8 }
        func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x61 + 10 }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index + 1 < utf8.count {
            bytes.append(nibble(utf8[index]) << 4 | nibble(utf8[index + 1]))
            index += 2
        }
        return bytes
    }
}
