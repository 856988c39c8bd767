import Foundation
import SessionStore
import SheetCore
import SheetJSON
import Testing

// The JSON the renderer writes for configurations, events, gestures and stored sessions, and
// what SheetCore's `Decodable` conformances make of it: the renderer is the only writer of these
// shapes, so each is checked here as a document and as a round trip.

private let t0 = Timestamp(millisecondsSince1970: 1_764_422_931_123)   // 2025-11-29T13:28:51.123Z

private func tick(_ n: Int64) -> Timestamp {
    Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + n * 1000)
}

private func seedConfiguration() throws -> SheetConfiguration {
    try SheetConfiguration(detents: [.large, .medium], defaultDetent: .large, thresholdDetent: .height(300))
}

/// Applies `action`; a refusal fails the test (every step here is one the rules allow).
@discardableResult
private func apply(_ sheet: inout Sheet, _ action: SheetAction, at now: Timestamp = t0) throws -> SheetOutcome {
    try sheet.apply(action, now: now)
}

/// A parsed JSON document, so shapes are compared as data rather than as text.
private enum JSONTree: Decodable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONTree]), object([String: JSONTree])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONTree].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONTree].self)) }
    }
}

private func tree(_ text: String) throws -> JSONTree {
    try JSONDecoder().decode(JSONTree.self, from: Data(text.utf8))
}

private func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}

private func gestureText(_ gesture: GestureResolution) -> String {
    var writer = JSONWriter()
    Rendering.gesture(gesture, into: &writer)
    return writer.text
}

private func stored(_ sheet: Sheet) -> String {
    Rendering.storedSessionText(SessionSnapshot(id: SessionID(high: 11, low: 12), sheet: sheet))
}

@Suite struct RenderedShapes {
    @Test func configurationShape() throws {
        let config = try seedConfiguration()
        #expect(try tree(Rendering.configurationText(config)) == tree("""
            {"detents":["height:300","medium","large"],"defaultDetent":"large","thresholdDetent":"height:300",
             "dismissPolicy":"intercept","interceptAction":"confirm","containerHeight":844,"decelerationRate":"normal",
             "protectWhen":"always","largestUndimmedDetent":null,"rootScreen":"root"}
            """))
        let text = Rendering.configurationText(config)
        #expect(text.contains(#""containerHeight":844,"#))   // an integer, not 844.0
        #expect(try decode(SheetConfiguration.self, text) == config)
    }

    @Test func configurationWithoutThresholdSaysNull() throws {
        let config = try SheetConfiguration(containerHeight: 700.5, decelerationRate: .fast)
        #expect(try tree(Rendering.configurationText(config)) == tree("""
            {"detents":["large"],"defaultDetent":"large","thresholdDetent":null,"dismissPolicy":"allow",
             "interceptAction":"confirm","containerHeight":700.5,"decelerationRate":"fast",
             "protectWhen":"always","largestUndimmedDetent":null,"rootScreen":"root"}
            """))
        #expect(Rendering.configurationText(config).contains(#""thresholdDetent":null"#))
        #expect(try decode(SheetConfiguration.self, Rendering.configurationText(config)) == config)
    }

    static let eventRows: [(SheetEvent.Kind, String)] = [
        (.presented(detent: .large, presentation: 2), #""detent":"large","presentation":2"#),
        (.detentChanged(from: .large, to: .medium, by: .user), #""from":"large","to":"medium","by":"user""#),
        (.detentChanged(from: .medium, to: .large, by: .app), #""from":"medium","to":"large","by":"app""#),
        (.intercepted(attempted: .detent(.height(300)), restoredTo: .medium), #""attempted":"height:300","restoredTo":"medium""#),
        (.intercepted(attempted: .closed, restoredTo: .large), #""attempted":"closed","restoredTo":"large""#),
        (.confirmationCancelled(detent: .fraction(0.25)), #""detent":"fraction:0.25""#),
        (.dismissBlocked(attempted: .closed), #""attempted":"closed""#),
        (.dismissed(reason: .discarded, screen: "root"), #""reason":"discarded","screen":"root""#),
        (.dismissed(reason: .parentDismissed, screen: "a.b_c-9"), #""reason":"parentDismissed","screen":"a.b_c-9""#),
        (.changesMarked(hasChanges: true), #""hasChanges":true"#),
        (.changesMarked(hasChanges: false), #""hasChanges":false"#),
        (.resized(from: 844, to: 390.5), #""from":844,"to":390.5"#),
        (.pushed(screen: "detail", depth: 2), #""screen":"detail","depth":2"#),
        (.popped(screens: ["c", "b"], depth: 1), #""screens":["c","b"],"depth":1"#),
        (.covered(child: childID), #""child":"AAAAAAAAAAAAAAAAAAAAAA""#),
        (.uncovered(child: childID, reason: .deleted), #""child":"AAAAAAAAAAAAAAAAAAAAAA","reason":"deleted""#),
        (.uncovered(child: childID, reason: .parentDismissed), #""child":"AAAAAAAAAAAAAAAAAAAAAA","reason":"parentDismissed""#),
    ]
    static let childID = SessionID(high: 0, low: 0)

    @Test(arguments: eventRows)
    func eventsAreFlat(kind: SheetEvent.Kind, fields: String) throws {
        let event = SheetEvent(seq: 3, at: t0, kind: kind)
        let expected = try tree(#"{"seq":3,"type":"\#(kind.type.rawValue)","at":"2025-11-29T13:28:51.123Z",\#(fields)}"#)
        #expect(try tree(Rendering.eventText(event)) == expected)
        #expect(!Rendering.eventText(event).contains("gesture"))
        #expect(try decode(SheetEvent.self, Rendering.eventText(event)) == event)
    }

    @Test func gestureRidesOnTheEvent() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let out = try apply(&sheet, .gesture(DragGesture(translation: 100, velocity: 1234)), at: tick(1))
        let event = try #require(out.events.first)
        // 744 − 1234 × 499 / 1000 = 128.234 (nearer 0 than 300): printed as written, no binary noise
        #expect(try tree(Rendering.eventText(event)) == tree("""
            {"seq":2,"type":"intercepted","at":"2025-11-29T13:28:52.123Z","attempted":"closed","restoredTo":"large",
             "gesture":{"releasedHeight":744,"projectedHeight":128.234,"target":"closed"}}
            """))
        let text = Rendering.eventText(event)
        #expect(text.contains(#""releasedHeight":744,"#))
        #expect(text.contains(#""projectedHeight":128.234,"#))
        #expect(try decode(SheetEvent.self, text) == event)
    }

    @Test(arguments: [(0.0, 0.0), (400, 0), (100, 1000), (300, 3000), (-50, -2000), (12.5, 777), (211, 0.1),
                      (100, 1234), (0.1, 0.2), (33.3, -4321.7)])
    func gestureHeightsAreReadable(translation: Double, velocity: Double) throws {
        let sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let r = sheet.resolve(DragGesture(translation: translation, velocity: velocity))
        let text = gestureText(r)
        // no float noise such as 245.00000000000045 or 444.0
        #expect(!text.contains("00000"), "\(text)")
        #expect(!text.contains(".0,") && !text.contains(".0}"), "\(text)")
        #expect(try decode(GestureResolution.self, text) == r)
    }

}

/// A session as a store keeps it in one document (the API's answer with its events beside it):
/// written by the renderer, read back by `Sheet`'s `Decodable`, the same sheet.
@Suite struct StoredSessionShapes {
    /// The seed scenario, then enough drags to wrap the ring, then a gesture: everything survives.
    static func busySheet() throws -> Sheet {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        try apply(&sheet, .drag(.detent(.medium)), at: tick(1))
        try apply(&sheet, .drag(.detent(.height(300))), at: tick(2))
        try apply(&sheet, .confirm(.discard), at: tick(3))
        try apply(&sheet, .present, at: tick(4))
        for i in 0..<280 { try apply(&sheet, .drag(.detent(i % 2 == 0 ? .medium : .large)), at: tick(Int64(5 + i))) }
        try apply(&sheet, .gesture(DragGesture(translation: 300, velocity: 3000)), at: tick(400))
        return sheet
    }

    @Test func roundTripsTheFullState() throws {
        let sheet = try Self.busySheet()
        #expect(sheet.phase == .confirming)
        let text = stored(sheet)
        let back = try decode(Sheet.self, text)
        #expect(back == sheet)
        #expect(back.version == sheet.version)
        #expect(back.updatedAt == sheet.updatedAt)
        #expect(back.createdAt == t0)
        #expect(Array(back.events) == Array(sheet.events))
        // and the decoded sheet keeps working the same way
        var a = sheet, b = back
        #expect(try a.apply(.confirm(.cancel), now: tick(500)) == b.apply(.confirm(.cancel), now: tick(500)))
        #expect(a == b)
    }

    @Test func storeShapeHasTheFields() throws {
        let sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        guard case .object(let o) = try tree(stored(sheet)) else { Issue.record("not an object"); return }
        #expect(Set(o.keys) == ["id", "version", "phase", "detent", "presentation", "dismissReason", "config", "createdAt", "updatedAt",
                                "hasChanges", "containerHeight", "heights", "thresholdActive", "dimmed", "backgroundInteractive",
                                "stack", "parent", "child", "events"])
        #expect(o["version"] == .number(1))
        #expect(o["phase"] == .string("presented"))
    }

    /// A sheet in a chain, resized, navigated and with changes: everything comes back; and a
    /// stored sheet from before these members existed reads with their defaults.
    @Test func part2StateRoundTrips() throws {
        let parentID = SessionID(high: 3, low: 4)
        var sheets: [SessionID: Sheet] = [parentID: Sheet(configuration: try seedConfiguration(), now: t0)]
        let childID = SessionID(high: 5, low: 6)
        let made = try SheetChain.present(childID, configuration: try seedConfiguration(), over: parentID,
                                          in: { sheets[$0] }, now: tick(1))
        for change in made.changes { sheets[change.id] = change.sheet }
        var parent = sheets[parentID]!
        try apply(&parent, .resize(containerHeight: 390.5), at: tick(2))
        try apply(&parent, .navigate(.push("detail")), at: tick(3))
        try apply(&parent, .changes(hasChanges: true), at: tick(4))
        for sheet in [parent, sheets[childID]!] {
            let back = try decode(Sheet.self, stored(sheet))
            #expect(back == sheet)
            #expect(back.child == sheet.child && back.parent == sheet.parent)
            #expect(back.containerHeight == sheet.containerHeight && back.thresholdActive == sheet.thresholdActive)
        }
        let full = stored(Sheet(configuration: try seedConfiguration(), now: t0))
        var old = try #require(try JSONSerialization.jsonObject(with: Data(full.utf8)) as? [String: Any])
        for key in ["hasChanges", "containerHeight", "stack"] { old[key] = nil }
        let upgraded = try decode(Sheet.self, String(decoding: try JSONSerialization.data(withJSONObject: old), as: UTF8.self))
        #expect(upgraded.stack == ["root"] && !upgraded.hasChanges && upgraded.containerHeight == 844)
    }

    @Test(arguments: [
        ("detent", #""detent":"height:300""#),                  // the threshold is never a resting detent
        ("detent", #""detent":"height:400""#),                  // not in the configuration
        ("version", #""version":9"#),
        ("dismissReason", #""dismissReason":"done""#),          // presented with a reason
        ("presentation", #""presentation":0"#),
    ])
    func refusesImpossibleStates(what: String, replacement: String) throws {
        let sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        var text = stored(sheet)
        let pattern = try Regex(#""\#(what)":("[^"]*"|[0-9]+|null)"#)
        if text.contains(pattern) {
            text = text.replacing(pattern, with: replacement)
        } else {
            text = text.replacingOccurrences(of: #""events""#, with: replacement + #","events""#)
        }
        #expect(throws: DecodingError.self) { try decode(Sheet.self, text) }
    }

    @Test func refusesAGapInTheLog() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        try apply(&sheet, .drag(.detent(.medium)))
        try apply(&sheet, .drag(.detent(.large)))
        let text = stored(sheet).replacingOccurrences(of: #""seq":2"#, with: #""seq":5"#)
        #expect(throws: DecodingError.self) { try decode(Sheet.self, text) }
    }
}
