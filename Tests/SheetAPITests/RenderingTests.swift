import Foundation
import SessionStore
import SheetCore
import Testing
@testable import SheetAPI
import SheetJSON
import SheetObservability

/// The hand-written JSON of the API is the only writer of its shapes: SheetCore's `Decodable`
/// conformances must read back exactly the values it wrote.
@Suite("Rendering decodes back")
struct RenderingTests {
    static func parse(_ bytes: [UInt8]) -> NSObject? {
        try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) as? NSObject
    }

    static func decoded<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }

    static func seedSheet() throws -> Sheet {
        let configuration = try SheetConfiguration(
            detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300))
        var sheet = Sheet(configuration: configuration, now: Timestamp(millisecondsSince1970: 1_764_422_931_123))
        var now: Int64 = 1_764_422_931_123
        for action in [SheetAction.drag(.detent(.medium)), .gesture(DragGesture(translation: 100, velocity: 1000)),
                       .confirm(.cancel), .drag(.detent(.height(300))), .confirm(.discard), .present,
                       .gesture(DragGesture(translation: 300, velocity: 3000))] {
            now += 1234
            _ = try sheet.apply(action, now: Timestamp(millisecondsSince1970: now))
        }
        return sheet
    }

    @Test func eventsDecodeBack() throws {
        let sheet = try Self.seedSheet()
        #expect(sheet.events.count > 5)
        for event in sheet.events {
            var writer = JSONWriter()
            Rendering.event(event, into: &writer)
            #expect(try Self.decoded(SheetEvent.self, writer.bytes) == event, "\(String(decoding: writer.bytes, as: UTF8.self))")
        }
    }

    /// Every kind of event, the ones no single session's story produces included.
    @Test func everyEventKindDecodesBack() throws {
        let child = SessionID(high: 7, low: 9)
        let kinds: [SheetEvent.Kind] = [
            .detentChanged(from: .large, to: .medium, by: .app), .dismissed(reason: .parentDismissed, screen: "edit"),
            .changesMarked(hasChanges: true), .resized(from: 844, to: 390.5), .pushed(screen: "a.b", depth: 2),
            .popped(screens: ["c", "b"], depth: 1), .covered(child: child), .uncovered(child: child, reason: .deleted),
        ]
        for kind in kinds {
            let event = SheetEvent(seq: 4, at: Timestamp(millisecondsSince1970: 1_764_422_931_123), kind: kind)
            var writer = JSONWriter()
            Rendering.event(event, into: &writer)
            #expect(try Self.decoded(SheetEvent.self, writer.bytes) == event, "\(String(decoding: writer.bytes, as: UTF8.self))")
            try Self.expectArchiveTextDecodesBack(event)
        }
    }

    /// What the archive stores for an event (`Rendering.eventText`) decodes back to the same event.
    static func expectArchiveTextDecodesBack(_ event: SheetEvent) throws {
        let text = Rendering.eventText(event)
        #expect(try JSONDecoder().decode(SheetEvent.self, from: Data(text.utf8)) == event, "\(text)")
    }

    @Test func archiveTextOfGestureEventsDecodesBack() throws {
        let t0 = Timestamp(millisecondsSince1970: 1_764_422_931_123)
        let gestures = [
            GestureResolution(releasedHeight: 744, projectedHeight: 128.234, target: .detent(.fraction(0.25))),
            GestureResolution(releasedHeight: -0.1, projectedHeight: 1e300, target: .closed),
        ]
        for gesture in gestures {
            try Self.expectArchiveTextDecodesBack(SheetEvent(seq: .max, at: t0, kind: .intercepted(attempted: .closed, restoredTo: .large), gesture: gesture))
        }
        for step in 0..<300 {
            var sheet = Sheet(configuration: try SheetConfiguration(detents: [.fraction(0.3), .medium, .large]), now: t0)
            let translation = Double(step * 6_661 % 2_000_001) / 1000 - 1000
            let velocity = Double(step * 7_919 % 20_001) / 7 - 1500
            guard let outcome = try? sheet.apply(.gesture(DragGesture(translation: translation, velocity: velocity)),
                                                 now: Timestamp(millisecondsSince1970: 1_764_422_932_123)) else { continue }
            for event in outcome.events { try Self.expectArchiveTextDecodesBack(event) }
        }
    }


    @Test func configurationDecodesBack() throws {
        for configuration in [
            try SheetConfiguration(),
            try SheetConfiguration(detents: [.fraction(0.25), .height(300.5), .medium], thresholdDetent: .fraction(0.25),
                                   dismissPolicy: .block, interceptAction: .notify, containerHeight: 700.5, decelerationRate: .fast,
                                   protectWhen: .hasChanges, largestUndimmedDetent: .medium, rootScreen: "list"),
        ] {
            var writer = JSONWriter()
            Rendering.configuration(configuration, into: &writer)
            #expect(try Self.decoded(SheetConfiguration.self, writer.bytes) == configuration)
        }
    }

    @Test func sessionShape() throws {
        let sheet = try Self.seedSheet()
        let snapshot = SessionSnapshot(id: SessionID.random(), sheet: sheet)
        let object = try #require(Self.parse(Rendering.sessionBody(snapshot)) as? [String: Any])
        #expect(Set(object.keys) == ["id", "version", "phase", "detent", "presentation", "dismissReason", "config", "createdAt", "updatedAt",
                                     "hasChanges", "containerHeight", "heights", "thresholdActive", "dimmed", "backgroundInteractive",
                                     "stack", "parent", "child"])
        #expect(object["version"] as? UInt64 == sheet.version)
        #expect(object["createdAt"] as? String == "2025-11-29T13:28:51.123Z")
        #expect((object["config"] as? NSObject) == Self.parse(Array(Rendering.configurationText(sheet.configuration).utf8)))
    }

    @Test(arguments: ["plain", "quote\"back\\slash", "new\nline\ttab", "nul\u{0}ctl\u{1f}", "ünïcødé ✓ 🎉"])
    func stringsRoundTrip(_ text: String) {
        var writer = JSONWriter()
        writer.string(text)
        #expect(Self.parse(writer.bytes) as? String == text)
    }

    @Test(arguments: [0.0, 844, 300.5, 0.1, -0.25, 1e-7, 123456789.125, 1e20])
    func numbersRoundTrip(_ value: Double) {
        var writer = JSONWriter()
        writer.number(value)
        #expect((Self.parse(writer.bytes) as? NSNumber)?.doubleValue == value)
    }
}

@Suite("JSONWriter")
struct JSONWriterTests {
    @Test(arguments: [Int64.min, -1, 0, 9, 10, 99, 100, 1_000_000_007, Int64.max])
    func integersPrintExactly(_ value: Int64) {
        var writer = JSONWriter(capacity: 1)
        writer.integer(value)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == String(value))
    }

    @Test func integersPastInt64PrintExactly() {
        var writer = JSONWriter(capacity: 1)
        writer.integer(UInt64.max)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "18446744073709551615")
    }

    /// A writer that starts far too small grows without losing or reordering anything.
    @Test func growsPastItsFirstCapacity() {
        var writer = JSONWriter(capacity: 1)
        let long = String(repeating: "abc\"", count: 500)
        writer.beginObject()
        writer.key("text"); writer.string(long)
        writer.key("list")
        writer.beginArray()
        for n in 0..<300 { writer.integer(n) }
        writer.endArray()
        writer.key("at")
        writer.unescapedString(length: Timestamp.rfc3339Length, Timestamp(millisecondsSince1970: 0).writeRFC3339)
        writer.endObject()
        let object = RenderingTests.parse(writer.bytes) as? [String: Any]
        #expect(object?["text"] as? String == long)
        #expect(object?["list"] as? [Int] == Array(0..<300))
        #expect(object?["at"] as? String == "1970-01-01T00:00:00.000Z")
    }

    /// The names written as literals are the enums' raw values and the detents' descriptions.
    @Test func namesWrittenAsLiteralsAreTheirRawValues() {
        func written(_ write: (inout JSONWriter) -> Void) -> String {
            var writer = JSONWriter()
            write(&writer)
            return String(decoding: writer.bytes, as: UTF8.self)
        }
        for phase in Phase.allCases { #expect(written { $0.phase(phase) } == "\"\(phase.rawValue)\"") }
        for type in SheetEvent.EventType.allCases { #expect(written { $0.eventType(type) } == "\"\(type.rawValue)\"") }
        for detent in [Detent.large, .medium, .fraction(0.25), .height(300.5)] {
            #expect(written { $0.detent(detent) } == "\"\(detent.description)\"")
        }
    }

    /// Timestamps in a row, as `rfc3339` writes each: the same instant again, the same day, another
    /// day, either side of midnight and of the formattable range.
    @Test func timestampsInARowAreEachTheirRFC3339() {
        let instants: [Int64] = [1_764_422_931_123, 1_764_422_931_123, 1_764_422_999_999, 1_764_460_799_999, 1_764_460_800_000,
                                 1_764_422_931_123, 0, -1, -1, -86_400_000, Int64.min, -62_167_219_200_000, -62_167_219_200_001,
                                 253_402_300_799_999, 253_402_300_800_000, Int64.max, 951_782_400_000, 951_868_799_999, 951_868_800_000]
        var writer = JSONWriter(capacity: 1)
        writer.beginArray()
        for instant in instants { writer.timestamp(Timestamp(millisecondsSince1970: instant)) }
        writer.endArray()
        let expected = "[" + instants.map { "\"" + Timestamp(millisecondsSince1970: $0).rfc3339 + "\"" }.joined(separator: ",") + "]"
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
    }

    /// Written in place into the returned array, or, past its capacity, moved to the writer's own
    /// buffer: the same bytes either way.
    @Test(arguments: [16, 100, 1000, 1010, 1011, 5000])
    func writesInPlaceOrOutgrows(capacity: Int) {
        func render(_ writer: inout JSONWriter) {
            writer.beginObject()
            writer.key("text"); writer.string(String(repeating: "x", count: 1000))
            writer.endObject()
        }
        var owned = JSONWriter()
        render(&owned)
        #expect(owned.bytes.count == 1011)
        #expect(JSONWriter.bytes(capacity: capacity, render) == owned.bytes)
    }
}

@Suite("Session ids")
struct SessionIDTests {
    @Test func roundTripAndRejectNonCanonical() {
        for _ in 0..<1000 {
            let id = SessionID.random()
            let text = id.description
            #expect(text.count == 22)
            #expect(text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(SessionID(text) == id)
        }
        #expect(SessionID("AAAAAAAAAAAAAAAAAAAAAA") == SessionID(high: 0, low: 0))
        #expect(SessionID("AAAAAAAAAAAAAAAAAAAAAB") == nil, "non-zero padding bits are another spelling")
        #expect(SessionID("AAAAAAAAAAAAAAAAAAAAA") == nil)
        #expect(SessionID("AAAAAAAAAAAAAAAAAAAAA=") == nil)
        #expect(SessionID(high: .max, low: .max).description == "_____________________w")
    }
}

@Suite("Metrics labels")
struct MetricsLabelTests {
    /// The metrics of a service as sheetd makes it: labelled by the route table.
    let metrics = ServiceObserver(level: .off, log: LogSink { _ in }).metrics

    @Test(arguments: ["/sessions", "/sessions/x", "/sessions/x/drag", "/sessions/x/confirm", "/sessions/x/dismiss",
                      "/sessions/x/present", "/sessions/x/events", "/healthz", "/metrics", "/openapi.yaml"])
    func routeIndexMatchesTemplate(_ path: String) throws {
        let route = try #require(Route(path: path))
        #expect(metrics.routes[route.index] == route.template)
    }

    @Test func everyRouteHasItsLabelAndUnmatchedIsLast() {
        #expect(metrics.routes == RouteTable.entries.map(\.template) + ["unmatched"])
        #expect(Set(metrics.routes).count == metrics.routes.count, "two routes share a template")
    }

    @Test func everyErrorStatusIsCountedAsItself() {
        for code in APIError.Code.allCases {
            #expect(Metrics.statuses.dropLast().contains(code.status), "\(code) answers \(code.status), counted as other")
        }
        #expect(Metrics.statuses.last == 0)
    }

    @Test func everyRoutedMethodIsCountedAsItself() {
        for entry in RouteTable.entries {
            for method in entry.allowedMethods {
                #expect(metrics.methods[metrics.methodIndex(method)] == method)
            }
        }
        #expect(metrics.methods[metrics.methodIndex("PATCH")] == "OTHER")
    }
}

@Suite("Route parsing")
struct RouteParsingTests {
    @Test(arguments: [
        ("/sessions", "/sessions", ""), ("/healthz", "/healthz", ""), ("/metrics", "/metrics", ""),
        ("/openapi.yaml", "/openapi.yaml", ""),
        ("/sessions/abc", "/sessions/{id}", "abc"), ("/sessions/abc/events", "/sessions/{id}/events", "abc"),
        ("/sessions/abc/drag", "/sessions/{id}/drag", "abc"), ("/sessions/abc/confirm", "/sessions/{id}/confirm", "abc"),
        ("/sessions/abc/dismiss", "/sessions/{id}/dismiss", "abc"), ("/sessions/abc/present", "/sessions/{id}/present", "abc"),
        ("/sessions/ünï/drag", "/sessions/{id}/drag", "ünï"),
        ("/", "/", ""), ("/playground", "/playground", ""), ("/playground.js", "/playground.js", ""),
    ])
    func knownPaths(_ path: String, _ template: String, _ id: String) throws {
        let route = try #require(Route(path: path))
        #expect(route.template == template)
        #expect(route.id == id)
    }

    @Test(arguments: ["", "//", "/playground/", "/playground.html", "/index.html", "/session", "/sessionsx", "/sessions/", "/healthz/", "/metricsx", "/openapi.yml",
                      "/sessions/abc/Drag", "/sessions/abc/dra", "/sessions/abc/drags", "/x/sessions/abc",
                      "/sessions//drag", "/sessions/x/drag/more", "/sessions/x/", "/sessions/x//"])
    func unknownPaths(_ path: String) {
        #expect(Route(path: path) == nil)
    }

    @Test func everyTemplateMatchesItselfAndIsDeclaredOnce() throws {
        for (index, entry) in RouteTable.entries.enumerated() {
            let path = entry.template.replacingOccurrences(of: "{id}", with: "some-id")
            #expect(try #require(Route(path: path)).index == index, "\(entry.template) is shadowed by an earlier entry")
            #expect(!entry.allowedMethods.isEmpty)
        }
    }
}

@Suite("Route table and openapi.yaml")
struct RouteTableDocumentTests {
    /// Paths and their methods as openapi.yaml declares them (two-space path keys, four-space methods).
    static func documentedRoutes() -> [String: Set<String>] {
        var routes: [String: Set<String>] = [:]
        var path: String?
        let methods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
        for line in String(decoding: OpenAPIDocument.bytes, as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                path = String(line.dropFirst(2).dropLast())
                routes[path!] = []
            } else if !line.hasPrefix(" "), !line.isEmpty {
                path = nil
            } else if let current = path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"),
                      methods.contains(String(line.dropFirst(4).dropLast())) {
                routes[current]!.insert(line.dropFirst(4).dropLast().uppercased())
            }
        }
        return routes
    }

    @Test func theDocumentDescribesExactlyTheTable() {
        var table: [String: Set<String>] = [:]
        for entry in RouteTable.entries { table[entry.template] = Set(entry.allowedMethods) }
        #expect(Self.documentedRoutes() == table)
    }
}

@Suite("Error statuses")
struct ErrorStatusTests {
    /// A body error (an unknown detent, a value out of range) is a 400; every other refusal of
    /// `Sheet.apply` is a conflict with the sheet's state.
    @Test(arguments: SheetError.Code.allCases)
    func sheetErrorsMapToTheirStatus(_ code: SheetError.Code) {
        let error = APIError(SheetError(code: code, message: "m"))
        #expect(error.code.rawValue == code.rawValue)
        #expect(error.code.status == (code == .unknownDetent || code == .invalidField ? 400 : 409))
    }
}

@Suite("Request ids")
struct RequestIDTests {
    @Test(arguments: [0, 1, 35, 36, 1295, 1296, 123_456_789, 4_738_381_338_321_616_895, UInt64.max])
    func generatedIDsAreThePrefixAndTheNumberInBase36(_ number: UInt64) {
        #expect(RequestIDSource.format(prefix: "k3x9", number: number) == "k3x9-" + String(number, radix: 36))
    }
}
