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
