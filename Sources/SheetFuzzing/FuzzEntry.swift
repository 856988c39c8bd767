import SessionStore
import SheetAPI
import SheetCore
import SheetJSON

/// Entry points for fuzzers (`Sources/sheetd-fuzz`, `Sources/SheetFuzzing`): the code that reads
/// untrusted bytes, callable without a server. A broken invariant traps, which is what a fuzzer
/// reports as a crash. Not used by the service itself.
public enum FuzzEntry {
    /// Runs `bytes` through the JSON parser, every route's body decoder, and the path and query
    /// readers. Invariants: a refused body is a 400 with an error body sheetd can read back; an
    /// accepted configuration renders a session body sheetd can read back; parsed ids and cursors
    /// print back to what they parse from.
    public static func decodeAllBodies(_ bytes: [UInt8]) {
        if let value = try? JSONParser.parse(bytes) { _ = value.kindName }
        decode({ () throws(APIError) in try RequestBodies.creation(bytes) }) { creation in
            if let parent = creation.parent { precondition(SessionID(parent.description) == parent, "parent \(parent) does not read back") }
            let sheet = Sheet(configuration: creation.configuration, now: Timestamp(millisecondsSince1970: 1_800_000_000_000))
            requireReadable(Rendering.sessionBody(SessionSnapshot(id: SessionID(high: 1, low: 2), sheet: sheet)), "a session body")
        }
        for decodeAction in RouteTable.actionDecoders {
            decode({ () throws(APIError) in try decodeAction(bytes) })
        }

        let text = String(decoding: bytes, as: UTF8.self)
        _ = Route(path: text)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).prefix(16) {
            let part = String(line)
            _ = Route(path: part).map(\.template)
            if let id = SessionID(part) {
                precondition(id.description == part, "session id \(part) prints as \(id)")
            }
            if let ordinal = ListCursor.decode(part) {
                precondition(ListCursor.decode(ListCursor.encode(ordinal)) == ordinal, "cursor \(part) does not round-trip")
            }
            if let number = try? SheetService.wholeNumber(part, field: "after") {
                precondition(String(number) == part.drop { $0 == "0" } || number == 0, "\(part) read as \(number)")
            }
        }
    }

    private static func decode<T>(_ body: () throws(APIError) -> T, accepted: (T) -> Void = { _ in }) {
        do {
            accepted(try body())
        } catch {
            precondition(error.code.status == 400, "a body was refused with \(error.code.rawValue), not a 400 code")
            requireReadable(Rendering.errorBody(error, requestID: "fuzz"), "an error body")
        }
    }

    /// sheetd must be able to read back every JSON text it writes, whatever client bytes it quotes.
    private static func requireReadable(_ json: [UInt8], _ what: String) {
        do {
            guard case .object = try JSONParser.parse(json) else {
                preconditionFailure("\(what) is not a JSON object: \(String(decoding: json, as: UTF8.self))")
            }
        } catch {
            preconditionFailure("sheetd wrote \(what) it cannot read back (\(error.message)): \(String(decoding: json, as: UTF8.self))")
        }
    }
}
