import SheetCore
import SheetFuzzing
import Testing
@testable import SheetAPI
import SheetJSON
import SheetObservability

/// The JSON decoder of request bodies: malformed input of every kind is a 400, never a crash.
@Suite("Request bodies")
struct RequestBodyTests {
    @Test(arguments: [
        "{", "}", "[", "{\"to\":}", "{\"to\":\"medium\",}", "{'to':'medium'}", "nul", "tru", "01", "1.", ".5",
        "{\"to\":\"medium\"}{}", "{\"a\":1,\"a\":2}", "{\"to\":\"\\ud800\"}",
    ])
    func malformedJSONIsInvalidJSON(_ text: String) {
        #expect(throws: APIError.self) { try RequestBodies.drag(Array(text.utf8)) }
        do { _ = try RequestBodies.drag(Array(text.utf8)) } catch {
            #expect(error.code == .service(.invalidJSON) || error.code == .sheet(.invalidField), "\(text): \(error.code)")
        }
    }

    @Test func brokenUTF8AndNULs() {
        let cases: [[UInt8]] = [
            [0x7B, 0x22, 0x74, 0x6F, 0x22, 0x3A, 0x22, 0xFF, 0xFE, 0x22, 0x7D],   // {"to":"\xff\xfe"}
            [0x7B, 0x00, 0x7D],
            Array("{\"to\":\"med\\u0000ium\"}".utf8),
            [0xC3],
        ]
        for bytes in cases {
            #expect(throws: APIError.self) { try RequestBodies.drag(bytes) }
        }
    }

    @Test func deepNestingIsRefusedBeforeParsing() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        do { _ = try RequestBodies.drag(Array(deep.utf8)); Issue.record("accepted") } catch {
            #expect(error.code == .service(.invalidJSON))
            #expect(error.message.contains("nesting"))
        }
        let object = "{\"to\":" + String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40) + "}"
        #expect(throws: APIError.self) { try RequestBodies.drag(Array(object.utf8)) }
    }

    @Test func hugeNumbersAreFieldErrors() {
        for text in ["{\"translation\":1e308}", "{\"translation\":123456789012345678901234567890}", "{\"translation\":-100000.5}"] {
            do { _ = try RequestBodies.drag(Array(text.utf8)); Issue.record("accepted \(text)") } catch {
                #expect(error.code == .sheet(.invalidField))
                #expect(error.field == "translation")
            }
        }
    }

    @Test func bothDragFormsDecode() throws {
        #expect(try RequestBodies.drag(Array(#"{"to":"closed"}"#.utf8)) == .drag(.closed))
        #expect(try RequestBodies.drag(Array(#"{"to":"height:3e2"}"#.utf8)) == .drag(.detent(.height(300))))
        #expect(try RequestBodies.drag(Array(#"{"translation":-50,"velocity":-2000}"#.utf8))
                == .gesture(DragGesture(translation: -50, velocity: -2000)))
        #expect(try RequestBodies.drag(Array(#" {"translation":12} "#.utf8)) == .gesture(DragGesture(translation: 12)))
    }

    /// A seeded generator of random and mutated bodies: every one is either accepted or a clean APIError.
    @Test func randomBodiesNeverCrash() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let seeds = [#"{"to":"medium"}"#, #"{"translation":400,"velocity":0}"#, #"{"detents":["large","medium"],"thresholdDetent":"height:300"}"#,
                     #"{"action":"discard"}"#, #"{"reason":"done"}"#]
        for _ in 0..<20_000 {
            var bytes = Array(seeds[Int(next() % UInt64(seeds.count))].utf8)
            for _ in 0..<Int(next() % 4 + 1) {
                let position = Int(next() % UInt64(bytes.count + 1))
                switch next() % 3 {
                case 0: bytes.insert(UInt8(truncatingIfNeeded: next()), at: position)
                case 1: if position < bytes.count { bytes.remove(at: position) }
                default: if position < bytes.count { bytes[position] = UInt8(truncatingIfNeeded: next()) }
                }
            }
            _ = try? RequestBodies.drag(bytes)
            _ = try? RequestBodies.configuration(bytes)
            _ = try? RequestBodies.confirm(bytes)
            _ = try? RequestBodies.dismiss(bytes)
        }
    }
}

/// `RequestBodies.creation` answers a body seen lately from memory: whatever the order and
/// however many distinct bodies pass, it gives what decoding the body gives, value or error.
@Suite("Creation bodies seen lately")
struct RecentCreationTests {
    static let bodies = [
        #"{"detents":["medium","large"]}"#, #"{"detents":["large","medium"]}"#, "{}", "", " ", #"{"detents":["medium"]}"#,
        #"{"detents":["medium","large"],"containerHeight":390}"#, #"{"detents":["medium","large"],"containerHeight":391}"#,
        #"{"parent":"AAAAAAAAAAAAAAAAAAAAAA"}"#, #"{"parent":"AAAAAAAAAAAAAAAAAAAAAB"}"#, #"{"parent":null,"rootScreen":"form"}"#,
        #"{"detents":["fraction:0.25","medium","large"],"defaultDetent":"medium","thresholdDetent":"fraction:0.25","dismissPolicy":"intercept"}"#,
        #"{"detents":["medium","large"],"rootScreen":"a"}"#, #"{"detents":["medium","large"],"rootScreen":"b"}"#,
        #"{"detents":[]}"#, #"{"detents":"large"}"#, #"{"bogus":1}"#, "{", #"{"detents":["medium","large"]} "#, "1234567",
        #"{"rootScreen":""# + String(repeating: "x", count: 1100) + #""}"#,
        // Alike in length, first and last eight bytes: told apart by the rest.
        #"{"rootScreen":"aaaa","detents":["large"]}"#, #"{"rootScreen":"bbbb","detents":["large"]}"#,
        #"{"rootScreen":"aAa","detents":["large"]}"#, #"{"rootScreen":"aaa","detents":["large"]} "#,
    ]

    static func describe(_ result: Result<(configuration: SheetConfiguration, parent: SessionID?), APIError>) -> String {
        switch result {
        case .success(let value): return "\(Rendering.configurationText(value.configuration)) over \(value.parent.map(\.description) ?? "none")"
        case .failure(let error): return "\(error.code) \(error.field ?? "-") \(error.message)"
        }
    }

    @Test func repeatedBodiesDecodeAsDecodingDoes() async {
        var random = SeededGenerator(seed: 0xC4EA_7E00)
        for round in 0..<3_000 {
            let body = Array(Self.bodies[Int.random(in: 0..<Self.bodies.count, using: &random)].utf8)
            let recent = Result { () throws(APIError) in try RequestBodies.creation(body) }
            let decoded = Result { () throws(APIError) in try RequestBodies.decodeCreation(body) }
            #expect(Self.describe(recent) == Self.describe(decoded), "\(String(decoding: body, as: UTF8.self))")
            if case .success(let a) = recent, case .success(let b) = decoded {
                #expect(a.configuration == b.configuration && a.parent == b.parent)
            }
            if round % 500 == 0 { await Task.yield() }
        }
    }
}
