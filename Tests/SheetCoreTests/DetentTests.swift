import SheetCore
import Testing

@Suite struct DetentParsing {
    /// Every bad detent the grammar refuses, and its edges.
    @Test(arguments: [
        ("fraction:0", DetentError.Code.outOfRange),
        ("fraction:1.5", .outOfRange),
        ("height:-3", .outOfRange),
        ("height:", .invalidNumber),
        ("tall", .unknownKind),
        ("HEIGHT:300", .unknownKind),
        ("height:nan", .invalidNumber),
        ("height:inf", .invalidNumber),
        ("", .empty),
        ("+large", .unknownKind),
        (" large", .unknownKind),
        ("height: 300", .invalidNumber),
        ("0x10", .unknownKind),
        // beyond the lists
        ("Large", .unknownKind),
        ("large ", .unknownKind),
        ("MEDIUM", .unknownKind),
        ("medium:", .unknownKind),
        ("closed", .unknownKind),
        ("fraction:", .invalidNumber),
        ("height:0x10", .invalidNumber),
        ("height:5.", .invalidNumber),
        ("height:.", .invalidNumber),
        ("height:+3", .invalidNumber),
        ("height:3e", .invalidNumber),
        ("height:e2", .invalidNumber),
        ("height:3e+", .invalidNumber),
        ("height:300 ", .invalidNumber),
        ("height:3_00", .invalidNumber),
        ("height:1,5", .invalidNumber),
        ("height:NaN", .invalidNumber),
        ("height:infinity", .invalidNumber),
        ("height:0x1p3", .invalidNumber),
        ("height:--3", .invalidNumber),
        ("height:0", .outOfRange),
        ("height:-0", .outOfRange),
        ("height:1e400", .outOfRange),
        ("height:1e-400", .outOfRange),
        ("fraction:-0.5", .outOfRange),
        ("fraction:1.0000001", .outOfRange),
        ("fraction:1e400", .outOfRange),
    ])
    func rejects(input: String, code: DetentError.Code) {
        #expect(throws: DetentError.self) { try Detent(parsing: input) }
        do {
            _ = try Detent(parsing: input)
        } catch {
            #expect(error.code == code)
            #expect(error.input == input)
            #expect(!error.message.isEmpty)
        }
    }

    @Test func messagesSayWhatIsWrong() throws {
        let fraction = #expect(throws: DetentError.self) { try Detent(parsing: "fraction:1.5") }
        #expect(fraction?.message == "fraction must be greater than 0 and at most 1, got 1.5")
        let height = #expect(throws: DetentError.self) { try Detent(parsing: "height:-3") }
        #expect(height?.message.contains("greater than 0, got -3") == true)
        let kind = #expect(throws: DetentError.self) { try Detent(parsing: "tall") }
        #expect(kind?.message.contains("\"tall\"") == true)
    }

    /// Accepted spellings and the canonical string each answers with.
    @Test(arguments: [
        ("large", "large"),
        ("medium", "medium"),
        ("height:300", "height:300"),
        ("height:300.0", "height:300"),
        ("height:300.5", "height:300.5"),
        ("height:3e2", "height:300"),
        ("height:3E2", "height:300"),
        ("height:3e+2", "height:300"),
        ("height:30000e-2", "height:300"),
        ("height:007", "height:7"),
        ("height:.5", "height:0.5"),
        ("height:0.00001", "height:1e-05"),
        ("height:1e20", "height:1e+20"),
        ("fraction:.25", "fraction:0.25"),
        ("fraction:0.250", "fraction:0.25"),
        ("fraction:1", "fraction:1"),
        ("fraction:1.0", "fraction:1"),
        ("fraction:0.1", "fraction:0.1"),
        ("fraction:5e-1", "fraction:0.5"),
    ])
    func canonicalForm(input: String, canonical: String) throws {
        let d = try Detent(parsing: input)
        #expect(d.description == canonical)
        // canonical output always parses back to the same detent
        #expect(try Detent(parsing: canonical) == d)
    }

    @Test func sameNumberIsSameDetent() throws {
        #expect(try Detent(parsing: "height:300") == Detent(parsing: "height:3e2"))
        #expect(try Detent(parsing: "fraction:.5") == Detent.fraction(0.5))
        #expect(Detent.fraction(0.5) != Detent.medium)   // distinct detents, same height
    }

    @Test(arguments: [
        ("large", 844.0), ("medium", 422.0), ("fraction:0.25", 211.0),
        ("height:300", 300.0), ("height:1000", 844.0), ("fraction:1", 844.0),
    ])
    func resolvesAgainstContainer(text: String, points: Double) {
        #expect(detent(text).resolvedHeight(containerHeight: 844) == points)
    }

    @Test func orderedByHeightThenCanonicalString() {
        let shuffled = ["large", "height:1000", "medium", "fraction:0.5", "height:300", "fraction:1"].map(detent)
        let sorted = shuffled.sorted { Detent.ordered($0, $1, containerHeight: 844) }
        #expect(sorted.map(\.description) ==
                ["height:300", "fraction:0.5", "medium", "fraction:1", "height:1000", "large"])
    }

    @Test(arguments: ["closed", "large", "medium", "fraction:0.25", "height:300"])
    func dragTargetsParse(text: String) throws {
        let t = try DragTarget(parsing: text)
        #expect(t.description == text)
        #expect(t == (text == "closed" ? .closed : .detent(detent(text))))
    }

    @Test(arguments: ["", "Closed", "close", "closed ", "height:x", "fraction:2"])
    func badDragTargets(text: String) {
        #expect(throws: DetentError.self) { try DragTarget(parsing: text) }
    }

    @Test func validityOfBuiltValues() {
        #expect(Detent.fraction(1).isValid)
        #expect(!Detent.fraction(0).isValid)
        #expect(!Detent.fraction(.nan).isValid)
        #expect(!Detent.height(.infinity).isValid)
        #expect(!Detent.height(-1).isValid)
    }
}

@Suite struct Timestamps {
    @Test(arguments: [
        (Int64(1_764_422_931_123), "2025-11-29T13:28:51.123Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        (-62_167_219_200_000, "0000-01-01T00:00:00.000Z"),
    ])
    func formatsAndParses(ms: Int64, text: String) {
        let t = Timestamp(millisecondsSince1970: ms)
        #expect(t.rfc3339 == text)
        #expect(Timestamp(rfc3339: text) == t)
    }

    @Test func clampsOutsideFourDigitYears() {
        #expect(Timestamp(millisecondsSince1970: .max).rfc3339 == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp(millisecondsSince1970: .min).rfc3339 == "0000-01-01T00:00:00.000Z")
    }

    @Test(arguments: [
        "2026-02-29T00:00:00.000Z", "2100-02-29T00:00:00.000Z", "2026-04-31T00:00:00.000Z",
        "2026-13-01T00:00:00.000Z", "2026-00-01T00:00:00.000Z", "2026-11-29T24:00:00.000Z",
        "2026-11-29T13:60:00.000Z", "2026-11-29T13:28:60.000Z", "2026-11-29T13:28:51Z",
        "2026-11-29T13:28:51.123z", "2026-11-29 13:28:51.123Z", "2026-11-29T13:28:51.123+00:00",
        "2026-11-29T13:28:51.1234Z", "-026-11-29T13:28:51.123Z", "",
    ])
    func rejectsOtherForms(text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test func roundTripsEveryKindOfInstant() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let ms = Int64(bitPattern: rng.next()) % 253_402_300_799_999
            let t = Timestamp(millisecondsSince1970: abs(ms))
            #expect(Timestamp(rfc3339: t.rfc3339) == t)
            let early = Timestamp(millisecondsSince1970: -(abs(ms) % 62_167_219_200_000))
            #expect(Timestamp(rfc3339: early.rfc3339) == early)
        }
    }

    @Test func ordersByTime() {
        #expect(Timestamp(millisecondsSince1970: 1) < Timestamp(millisecondsSince1970: 2))
    }
}
