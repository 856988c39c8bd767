import Foundation
import SheetCore
import SheetFuzzing
import SheetJSON
import Testing

/// The flat-object reader in front of jansson must never change what a body means: for every
/// input it either declines or gives exactly jansson's value, and `JSONParser.parse` (reader,
/// then jansson) gives exactly what jansson alone gives, value or error.
@Suite("Flat object reader against jansson")
struct FlatObjectReaderTests {
    /// Equal as parsed values, numbers compared bit for bit (-0 is not 0) and keys in order.
    static func identical(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.number(let x), .number(let y)): return x.bitPattern == y.bitPattern
        case (.string(let x), .string(let y)): return Array(x.utf8) == Array(y.utf8)
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(identical)
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { Array($0.key.utf8) == Array($1.key.utf8) && identical($0.value, $1.value) }
        default: return false
        }
    }

    enum Verdict { case declined, accepted }

    /// Checks one input; says whether the reader took it.
    @discardableResult
    static func check(_ bytes: [UInt8]) -> Verdict {
        let jansson = Result { () throws(JSONSyntaxError) in try JSONParser.parseWithJansson(bytes) }
        let combined = Result { () throws(JSONSyntaxError) in try JSONParser.parse(bytes) }
        let shown = String(decoding: bytes, as: UTF8.self).debugDescription
        switch (jansson, combined) {
        case (.success(let expected), .success(let got)):
            #expect(identical(expected, got), "\(shown): jansson \(expected), parse \(got)")
        case (.failure(let expected), .failure(let got)):
            #expect(expected == got, "\(shown)")
        default:
            Issue.record("\(shown): jansson \(jansson), parse \(combined)")
        }
        guard let fast = JSONParser.parseFlatObject(bytes) else { return .declined }
        guard case .success(let expected) = jansson else {
            Issue.record("\(shown): the reader accepted what jansson refuses: \(jansson)")
            return .accepted
        }
        #expect(identical(expected, fast), "\(shown): jansson \(expected), reader \(fast)")
        return .accepted
    }

    static let openAPIExamples = [
        #"{"detents":["large","medium"],"defaultDetent":"large","thresholdDetent":"height:300"}"#, "{}",
        #"{"parent":"q3Zb8mXr2VtYkLpN0aBcDe"}"#,
        #"{"detents":["fraction:0.25","medium","large"],"defaultDetent":"medium","thresholdDetent":"fraction:0.25","dismissPolicy":"intercept","interceptAction":"notify","containerHeight":932,"decelerationRate":"fast","protectWhen":"hasChanges","largestUndimmedDetent":"medium","rootScreen":"form"}"#,
        #"{"to":"medium"}"#, #"{"to":"height:300"}"#, #"{"to":"closed"}"#, #"{"translation":300,"velocity":3000}"#,
        #"{"action":"cancel"}"#, #"{"action":"discard"}"#, #"{"reason":"done"}"#, #"{"hasChanges":true}"#,
        #"{"detent":"medium"}"#, #"{"containerHeight":390}"#, #"{"push":"account"}"#,
    ]

    /// Rows at the edges of what the reader takes, each either way.
    static let handRows = [
        #"{"to": "medium"}"#, " \t\r\n{ \"to\" :\n\"large\" , \"x\":null } \r\n", #"{"a":-0}"#, #"{"a":-0.0}"#, #"{"a":0.1}"#,
        #"{"a":0.30000000000000004}"#, #"{"a":123456789012345}"#, #"{"a":1234567890123456}"#, #"{"a":999999999999999}"#,
        #"{"a":-99999.99999}"#, #"{"a":0.000000000000001}"#, #"{"a":1.5e3}"#, #"{"a":1E3}"#, #"{"a":01}"#, #"{"a":1.}"#,
        #"{"a":.5}"#, #"{"a":-}"#, #"{"a":--1}"#, #"{"a":+1}"#, #"{"a":1,}"#, #"{"a":tru}"#, #"{"a":truex}"#, #"{"a":nulll}"#,
        #"{"a":false,"b":true,"c":null}"#, #"{"a":1,"a":1}"#, #"{"a":1,"b":2,"a":3}"#, "{\"a\":\"\u{7F}\"}", "{\"\u{7F}\":1}",
        "{\"a\":\"x\u{1F}\"}", "{\"a\":\"\u{0}\"}", #"{"a":"\u0041"}"#, #"{"a":"\\"}"#, #"{"":""}"#, #"{"a":[]}"#, #"{"a":[1,"b",null,true]}"#,
        #"{"a":[1,]}"#, #"{"a":[[1]]}"#, #"{"a":[{}]}"#, #"{"a":{}}"#, #"{"a":[1 , 2 ]}"#, #"{"a":1]"#, #"{"a":[1}"#, "[]", "{}}",
        "{} x", "{}\u{0}", "\u{C}{}", "{\"a\":\"é\"}", "{\"é\":1}", #"{"a":1}{"#, #"{"a"}"#, #"{"a":}"#, #"{,}"#, #"{"a" 1}"#,
        #"{"a":1 "b":2}"#, #"{"translation":1e400}"#, #"{"translation":123456789012345678901234567890}"#,
        #"{"a":0,"b":0.0,"c":-0.5,"d":7.25,"e":100000,"f":844}"#,
    ] + [
        "{" + (0..<8).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}",
        "{" + (0..<9).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}",
        "{\"a\":[" + (0..<16).map(String.init).joined(separator: ",") + "]}",
        "{\"a\":[" + (0..<17).map(String.init).joined(separator: ",") + "]}",
    ]

    /// The bodies of the fuzz corpus: the body files whole, and each request's body in the scripts.
    static func corpusBodies() throws -> [[UInt8]] {
        try FuzzCorpusTests.corpus().flatMap { input -> [[UInt8]] in
            let text = String(decoding: input, as: UTF8.self)
            guard text.contains("%%") || text.hasPrefix("GET ") || text.hasPrefix("POST ") else { return [input] }
            return text.components(separatedBy: "\n%%\n").compactMap { request in
                request.range(of: "\n\n").map { Array(request[$0.upperBound...].utf8) }
            }
        }
    }

    @Test func corpusExamplesAndHandRows() throws {
        let corpus = try Self.corpusBodies()
        #expect(corpus.count > 40)
        var accepted = 0
        for bytes in corpus + (Self.openAPIExamples + Self.handRows).map({ Array($0.utf8) }) where Self.check(bytes) == .accepted {
            accepted += 1
        }
        #expect(accepted > 40, "the reader took \(accepted) inputs")
        // Every example but the creation with all ten fields (more members than the reader keeps).
        for example in Self.openAPIExamples where !example.contains("rootScreen") {
            #expect(JSONParser.parseFlatObject(Array(example.utf8)) != nil, "\(example) goes to jansson")
        }
    }

    /// Random bodies of the reader's own grammar, numbers in particular: digits of every length
    /// up to and past its limit, with and without a fraction and a sign, whitespace anywhere.
    @Test func generatedFlatObjects() async {
        var random = SeededGenerator(seed: 0x0F1A_7B0D)
        let whitespace = ["", "", "", " ", "\n", "\t", "\r\n  "]
        func space() -> String { whitespace[Int.random(in: 0..<whitespace.count, using: &random)] }
        func digits(_ count: Int) -> String { String((0..<count).map { _ in Character(String(Int.random(in: 0...9, using: &random))) }) }
        func scalar() -> String {
            switch Int.random(in: 0...9, using: &random) {
            case 0: return "null"
            case 1: return Bool.random(using: &random) ? "true" : "false"
            case 2: return "\"" + String((0..<Int.random(in: 0...12, using: &random)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7F, using: &random))) }).replacingOccurrences(of: "\\", with: "/").replacingOccurrences(of: "\"", with: "'") + "\""
            default:
                let sign = Bool.random(using: &random) ? "-" : ""
                let whole = Bool.random(using: &random) ? "0" : String(Int.random(in: 1...9, using: &random)) + digits(Int.random(in: 0...16, using: &random))
                let fraction = Bool.random(using: &random) ? "" : "." + digits(Int.random(in: 1...17, using: &random))
                return sign + whole + fraction
            }
        }
        var accepted = 0
        for round in 0..<10_000 {
            let count = Int.random(in: 0...5, using: &random)
            let members = (0..<count).map { index -> String in
                let value = Int.random(in: 0...5, using: &random) == 0
                    ? "[" + (0..<Int.random(in: 0...4, using: &random)).map { _ in space() + scalar() + space() }.joined(separator: ",") + "]"
                    : scalar()
                return space() + "\"k\(index % 4 == 3 ? 0 : index)\"" + space() + ":" + space() + value + space()
            }
            let text = space() + "{" + members.joined(separator: ",") + (count == 0 ? space() : "") + "}" + space()
            if Self.check(Array(text.utf8)) == .accepted { accepted += 1 }
            if round % 1000 == 0 { await Task.yield() }
        }
        #expect(accepted > 2_500, "the reader took \(accepted) of 10,000")
    }

    /// Seeded mutations of the corpus and the examples toward the bytes that matter to a parser.
    @Test func mutatedBodies() async throws {
        let seeds = try Self.corpusBodies() + (Self.openAPIExamples + Self.handRows).map { Array($0.utf8) }
        let interesting = Array("{}[]\",:.-+eE0123456789 \t\n\r\\/tfnrulasex".utf8) + [0x00, 0x01, 0x1F, 0x7F, 0x80, 0xC3, 0xA9, 0xFF]
        var random = SeededGenerator(seed: 0xF1A7_0B1E)
        var accepted = 0
        for round in 0..<15_000 {
            var bytes = seeds[Int.random(in: 0..<seeds.count, using: &random)]
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let byte = Int.random(in: 0...3, using: &random) == 0 ? UInt8.random(in: 0...255, using: &random)
                    : interesting[Int.random(in: 0..<interesting.count, using: &random)]
                let position = Int.random(in: 0...bytes.count, using: &random)
                switch Int.random(in: 0...2, using: &random) {
                case 0: bytes.insert(byte, at: position)
                case 1: if position < bytes.count { bytes.remove(at: position) }
                default: if position < bytes.count { bytes[position] = byte }
                }
            }
            if Self.check(bytes) == .accepted { accepted += 1 }
            if round % 1000 == 0 { await Task.yield() }
        }
        #expect(accepted > 750, "the reader took \(accepted) of 15,000")
    }
}

/// The decoders of every route, given the body read by the flat reader (`BodyObject.parse`) and
/// by jansson alone (`parseWithJansson`): the same action or the same error, for the corpus,
/// generated bodies of the routes' fields and their mutations.
@Suite("Request decoders on either reader")
struct BodyObjectReaderTests {
    static func describe<T>(_ result: Result<T, APIError>) -> String {
        switch result {
        case .success(let value): return "\(value)"
        case .failure(let error): return "\(error.code) \(error.field ?? "-") \(error.message)"
        }
    }

    /// What every route's decoder makes of `body`: from the body (the flat reader first), or
    /// from jansson's parse of it.
    static func decodedByEveryRoute(_ body: [UInt8], janssonOnly: Bool) -> [String] {
        func run<T>(_ fromBody: ([UInt8]) throws(APIError) -> T, _ fromObject: (BodyObject) throws(APIError) -> T) -> String {
            if janssonOnly {
                return describe(Result { () throws(APIError) in try fromObject(BodyObject.parseWithJansson(body)) })
            }
            return describe(Result { () throws(APIError) in try fromBody(body) })
        }
        func creation(_ value: (configuration: SheetConfiguration, parent: SessionID?)) -> String {
            Rendering.configurationText(value.configuration) + " over \(value.parent.map(\.description) ?? "none")"
        }
        return [
            run(RequestBodies.drag, RequestBodies.drag(object:)),
            run(RequestBodies.confirm, RequestBodies.confirm(object:)),
            run(RequestBodies.dismiss, RequestBodies.dismiss(object:)),
            run(RequestBodies.present, RequestBodies.present(object:)),
            run(RequestBodies.changes, RequestBodies.changes(object:)),
            run(RequestBodies.select, RequestBodies.select(object:)),
            run(RequestBodies.resize, RequestBodies.resize(object:)),
            run(RequestBodies.navigate, RequestBodies.navigate(object:)),
            run({ (body) throws(APIError) in creation(try RequestBodies.decodeCreation(body)) },
                { (object) throws(APIError) in creation(try RequestBodies.decodeCreation(object: object)) }),
        ]
    }

    static let fields = ["to", "translation", "velocity", "action", "reason", "hasChanges", "detent", "containerHeight", "push", "pop",
                         "detents", "defaultDetent", "thresholdDetent", "dismissPolicy", "interceptAction", "decelerationRate",
                         "protectWhen", "largestUndimmedDetent", "rootScreen", "parent", "bogus"]

    /// Checks one body through every decoder and the String-named lookups; says whether the flat
    /// reader took it.
    @discardableResult
    static func check(_ body: [UInt8]) -> Bool {
        let shown = String(decoding: body, as: UTF8.self).debugDescription
        #expect(decodedByEveryRoute(body, janssonOnly: false) == decodedByEveryRoute(body, janssonOnly: true), "\(shown)")
        guard let flat = try? BodyObject.parse(body), let tree = try? BodyObject.parseWithJansson(body) else {
            #expect((try? BodyObject.parse(body)) == nil && (try? BodyObject.parseWithJansson(body)) == nil, "\(shown)")
            return false
        }
        #expect(FlatObjectReaderTests.identical(.object(flat.members), .object(tree.members)), "\(shown)")
        for field in fields {
            #expect(describe(Result { () throws(APIError) in try flat.string(field) }) == describe(Result { () throws(APIError) in try tree.string(field) }))
            #expect(describe(Result { () throws(APIError) in try flat.number(field) }) == describe(Result { () throws(APIError) in try tree.number(field) }))
            #expect(describe(Result { () throws(APIError) in try flat.nullableDetent(field) }) == describe(Result { () throws(APIError) in try tree.nullableDetent(field) }))
            #expect(describe(Result { () throws(APIError) in try flat.choice(field, as: ConfirmAction.self) })
                    == describe(Result { () throws(APIError) in try tree.choice(field, as: ConfirmAction.self) }))
        }
        for known in [[], ["to"], ["to", "translation", "velocity"], fields] {
            #expect(describe(Result { () throws(APIError) in try flat.rejectUnknown(known) }) == describe(Result { () throws(APIError) in try tree.rejectUnknown(known) }))
        }
        return true
    }

    @Test func corpusAndExamples() throws {
        var flat = 0
        for body in try FlatObjectReaderTests.corpusBodies() + (FlatObjectReaderTests.openAPIExamples + FlatObjectReaderTests.handRows).map({ Array($0.utf8) })
        where Self.check(body) { flat += 1 }
        #expect(flat > 40)
    }

    /// Bodies of the routes' fields with values of every kind, then mutated.
    @Test func generatedAndMutatedBodies() async {
        var random = SeededGenerator(seed: 0xB0D1_0B7E)
        let strings = ["medium", "large", "closed", "height:300", "fraction:0.5", "height:-1", "fraction:2", "bogus", "discard", "save",
                       "cancel", "done", "programmatic", "account", "", "x y", "AAAAAAAAAAAAAAAAAAAAAA", "allow", "intercept", "notify",
                       "fast", "hasChanges", "Medium", "root"]
        func value() -> String {
            switch Int.random(in: 0...9, using: &random) {
            case 0: return "null"
            case 1: return Bool.random(using: &random) ? "true" : "false"
            case 2: return "[" + (0..<Int.random(in: 0...3, using: &random)).map { _ in "\"" + strings.randomElement(using: &random)! + "\"" }.joined(separator: ",") + "]"
            case 3, 4: return ["0", "1", "-1", "12.5", "300", "-0", "100000", "100000.5", "9999.75", "10001", "2", "0.5", "1000000000"].randomElement(using: &random)!
            default: return "\"" + strings.randomElement(using: &random)! + "\""
            }
        }
        let interesting = Array("{}[]\",:.-+eE0123456789 \t\n\\tfnu".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xFF]
        var flat = 0
        for round in 0..<1_500 {
            let members = (0..<Int.random(in: 0...4, using: &random)).map { _ in
                "\"" + Self.fields.randomElement(using: &random)! + "\":" + value()
            }
            var body = Array(("{" + members.joined(separator: ",") + "}").utf8)
            if round % 3 == 0 {
                for _ in 0..<Int.random(in: 1...2, using: &random) {
                    let position = Int.random(in: 0...body.count, using: &random)
                    let byte = interesting.randomElement(using: &random)!
                    switch Int.random(in: 0...2, using: &random) {
                    case 0: body.insert(byte, at: position)
                    case 1: if position < body.count { body.remove(at: position) }
                    default: if position < body.count { body[position] = byte }
                    }
                }
            }
            if Self.check(body) { flat += 1 }
            if round % 50 == 0 { await Task.yield() }
        }
        #expect(flat > 600, "the flat reader took \(flat) of 1,500")
    }
}
