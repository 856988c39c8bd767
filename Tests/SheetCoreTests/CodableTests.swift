import Foundation
import SheetCore
import Testing

func encoded<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}

@Suite struct CodableShapes {
    @Test func detentsAreCanonicalStrings() throws {
        #expect(try encoded([detent("height:300.0"), detent("fraction:.25"), .large, .medium]) ==
                #"["height:300","fraction:0.25","large","medium"]"#)
        #expect(try decode([Detent].self, #"["height:3e2","medium"]"#) == [.height(300), .medium])
        #expect(throws: DecodingError.self) { try decode([Detent].self, #"["tall"]"#) }
        #expect(throws: DecodingError.self) { try decode([Detent].self, #"[300]"#) }
        #expect(try encoded([DragTarget.closed, .detent(.height(300.5))]) == #"["closed","height:300.5"]"#)
    }

    @Test func timestampIsAnRFC3339String() throws {
        #expect(try encoded([t0]) == #"["2025-11-29T13:28:51.123Z"]"#)
        #expect(try decode([Timestamp].self, #"["2025-11-29T13:28:51.123Z"]"#) == [t0])
        #expect(throws: DecodingError.self) { try decode([Timestamp].self, #"["2025-11-29T13:28:51Z"]"#) }
    }

    @Test func configurationDecodingRevalidates() throws {
        #expect(throws: DecodingError.self) {
            try decode(SheetConfiguration.self, #"{"detents":["large"],"thresholdDetent":"height:300","dismissPolicy":"allow"}"#)
        }
        #expect(throws: DecodingError.self) { try decode(SheetConfiguration.self, #"{"containerHeight":0}"#) }
        #expect(throws: DecodingError.self) { try decode(SheetConfiguration.self, #"{"detents":[]}"#) }
        // missing keys take their defaults
        #expect(try decode(SheetConfiguration.self, "{}") == SheetConfiguration())
    }

    /// Events written before `by` and `screen` existed read back as what they were then: a
    /// user's move, and a dismissal from the only screen, "root".
    @Test func eventsOfTheFirstSchemaStillDecode() throws {
        let moved = try decode(SheetEvent.self, #"{"seq":2,"type":"detentChanged","at":"2025-11-29T13:28:51.123Z","from":"large","to":"medium"}"#)
        #expect(moved.kind == .detentChanged(from: .large, to: .medium, by: .user))
        let gone = try decode(SheetEvent.self, #"{"seq":3,"type":"dismissed","at":"2025-11-29T13:28:51.123Z","reason":"swipe"}"#)
        #expect(gone.kind == .dismissed(reason: .swipe, screen: "root"))
    }

    @Test func dragGestureCoding() throws {
        #expect(try encoded(DragGesture(translation: 400)) == #"{"translation":400,"velocity":0}"#)
        #expect(try decode(DragGesture.self, #"{"translation":12.5}"#) == DragGesture(translation: 12.5))
    }

    @Test func unknownEventTypeIsRefused() {
        #expect(throws: DecodingError.self) {
            try decode(SheetEvent.self, #"{"seq":1,"type":"exploded","at":"2025-11-29T13:28:51.123Z"}"#)
        }
    }

    @Test func enumsAreTheirAPIStrings() throws {
        #expect(try encoded([Phase.presented, .confirming, .dismissed]) == #"["presented","confirming","dismissed"]"#)
        #expect(try encoded(DismissReason.allCases) == #"["swipe","done","programmatic","discarded","saved","parentDismissed"]"#)
        #expect(try encoded(UncoverReason.allCases) == #"["swipe","done","programmatic","discarded","saved","parentDismissed","deleted"]"#)
        #expect(try encoded(DetentMover.allCases) == #"["user","app"]"#)
        #expect(try encoded(ProtectWhen.allCases) == #"["always","hasChanges"]"#)
        #expect(try encoded(DismissPolicy.allCases) == #"["allow","intercept","block"]"#)
    }
}
