import SheetCore
import Testing

/// A session id's 22 characters: unpadded base64url of its 16 bytes, written and read back.
@Suite struct SessionIDSpelling {
    @Test("an id is spelled as the base64url of its 16 bytes, high word first", arguments: [
        (UInt64(0), UInt64(0), "AAAAAAAAAAAAAAAAAAAAAA"),
        (UInt64.max, UInt64.max, "_____________________w"),
        (11, 12, "AAAAAAAAAAsAAAAAAAAADA"),
        (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210, "ASNFZ4mrze_-3LqYdlQyEA"),
    ])
    func spelling(high: UInt64, low: UInt64, text: String) {
        #expect(SessionID(high: high, low: low).description == text)
        #expect(SessionID(text) == SessionID(high: high, low: low))
    }
}

/// Reading an id back: exactly the spellings `description` writes parse, each to the id that
/// writes it; any other byte anywhere, a last character with bits past the 128th, or another
/// length is no id.
@Suite struct SessionIDParsing {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// An id whose characters are all different values, so a character read into the wrong place shows.
    static let sample = SessionID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)

    /// Byte by byte, from the alphabet: nil for a byte outside it or a last character with any
    /// of its low four bits set.
    static func expectedValid(_ bytes: [UInt8]) -> Bool {
        guard bytes.count == 22 else { return false }
        for (index, byte) in bytes.enumerated() {
            guard let value = alphabet.firstIndex(of: byte) else { return false }
            if index == 21 && value & 0b1111 != 0 { return false }
        }
        return true
    }

    static func parse(_ bytes: [UInt8]) -> SessionID? {
        bytes.withUnsafeBufferPointer { SessionID(utf8: $0) }
    }

    @Test("every byte value at every place of a valid id", arguments: 0..<22)
    func everyByte(at place: Int) {
        var bytes = Array(Self.sample.description.utf8)
        for byte in UInt8.min...UInt8.max {
            bytes[place] = byte
            let parsed = Self.parse(bytes)
            #expect((parsed != nil) == Self.expectedValid(bytes), "byte \(byte) at \(place)")
            if let parsed {
                #expect(Array(parsed.description.utf8) == bytes, "byte \(byte) at \(place)")
            }
        }
    }

    @Test("ids of single bits read back to themselves", arguments: 0..<128)
    func singleBit(_ bit: Int) {
        let id = bit < 64 ? SessionID(high: 0, low: 1 << UInt64(bit)) : SessionID(high: 1 << UInt64(bit - 64), low: 0)
        #expect(SessionID(id.description) == id)
        #expect(SessionID(Substring(id.description)) == id)
    }

    @Test("other lengths are no id", arguments: [0, 1, 21, 23, 44])
    func otherLengths(_ count: Int) {
        let bytes = Array(repeating: UInt8(ascii: "A"), count: count)
        #expect(Self.parse(bytes) == nil)
        #expect(SessionID(String(decoding: bytes, as: UTF8.self)) == nil)
    }
}
