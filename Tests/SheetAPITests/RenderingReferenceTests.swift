import SessionStore
import SheetCore
import SheetFuzzing
import SheetJSON
import Testing

/// The answers as plainly as they can be written: each member through `JSONWriter`'s general
/// calls (`key`, `string`, `number`), timestamps through `Timestamp.rfc3339`, ids through
/// `description`, event members listed here by hand. `Rendering` takes shortcuts (cached
/// configurations and timestamps, members spelled out whole); its bytes must be these.
enum ReferenceRendering {
    static func session(_ snapshot: SessionSnapshot, into writer: inout JSONWriter, events: ArraySlice<SheetEvent>? = nil) {
        let sheet = snapshot.sheet
        writer.beginObject()
        writer.key("id"); writer.string(snapshot.id.description)
        writer.key("version"); writer.integer(sheet.version)
        writer.key("phase"); writer.string(sheet.phase.rawValue)
        writer.key("detent"); writer.string(sheet.detent.description)
        writer.key("presentation"); writer.integer(sheet.presentation)
        writer.key("dismissReason"); if let reason = sheet.dismissReason { writer.string(reason.rawValue) } else { writer.null() }
        writer.key("hasChanges"); writer.bool(sheet.hasChanges)
        writer.key("containerHeight"); writer.number(sheet.containerHeight)
        writer.key("stack"); strings(sheet.stack, into: &writer)
        writer.key("parent"); id(sheet.parent, into: &writer)
        writer.key("child"); id(sheet.child, into: &writer)
        writer.key("heights")
        writer.beginObject()
        for (detent, points) in sheet.heights { writer.string(detent.description); writer.member(":"); writer.number(points) }
        writer.endObject()
        writer.key("thresholdActive"); writer.bool(sheet.thresholdActive)
        writer.key("dimmed"); writer.bool(sheet.dimmed)
        writer.key("backgroundInteractive"); writer.bool(sheet.backgroundInteractive)
        writer.key("config"); configuration(sheet.configuration, into: &writer)
        writer.key("createdAt"); writer.string(sheet.createdAt.rfc3339)
        writer.key("updatedAt"); writer.string(sheet.updatedAt.rfc3339)
        if let events {
            writer.key("events")
            writer.beginArray()
            for event in events { self.event(event, into: &writer) }
            writer.endArray()
        }
        writer.endObject()
    }

    static func configuration(_ configuration: SheetConfiguration, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("detents"); strings(configuration.detents.map(\.description), into: &writer)
        writer.key("defaultDetent"); writer.string(configuration.defaultDetent.description)
        writer.key("thresholdDetent"); optional(configuration.thresholdDetent?.description, into: &writer)
        writer.key("dismissPolicy"); writer.string(configuration.dismissPolicy.rawValue)
        writer.key("interceptAction"); writer.string(configuration.interceptAction.rawValue)
        writer.key("containerHeight"); writer.number(configuration.containerHeight)
        writer.key("decelerationRate"); writer.string(configuration.decelerationRate.rawValue)
        writer.key("protectWhen"); writer.string(configuration.protectWhen.rawValue)
        writer.key("largestUndimmedDetent"); optional(configuration.largestUndimmedDetent?.description, into: &writer)
        writer.key("rootScreen"); writer.string(configuration.rootScreen)
        writer.endObject()
    }

    static func event(_ event: SheetEvent, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("seq"); writer.integer(event.seq)
        writer.key("type"); writer.string(event.kind.type.rawValue)
        writer.key("at"); writer.string(event.at.rfc3339)
        switch event.kind {
        case let .presented(detent, presentation):
            writer.key("detent"); writer.string(detent.description)
            writer.key("presentation"); writer.integer(presentation)
        case let .detentChanged(from, to, by):
            writer.key("from"); writer.string(from.description)
            writer.key("to"); writer.string(to.description)
            writer.key("by"); writer.string(by.rawValue)
        case let .intercepted(attempted, restoredTo):
            writer.key("attempted"); writer.string(attempted.description)
            writer.key("restoredTo"); writer.string(restoredTo.description)
        case let .confirmationCancelled(detent):
            writer.key("detent"); writer.string(detent.description)
        case let .dismissBlocked(attempted):
            writer.key("attempted"); writer.string(attempted.description)
        case let .dismissed(reason, screen):
            writer.key("reason"); writer.string(reason.rawValue)
            writer.key("screen"); writer.string(screen)
        case let .changesMarked(hasChanges):
            writer.key("hasChanges"); writer.bool(hasChanges)
        case let .resized(from, to):
            writer.key("from"); writer.number(from)
            writer.key("to"); writer.number(to)
        case let .pushed(screen, depth):
            writer.key("screen"); writer.string(screen)
            writer.key("depth"); writer.integer(depth)
        case let .popped(screens, depth):
            writer.key("screens"); strings(screens, into: &writer)
            writer.key("depth"); writer.integer(depth)
        case let .covered(child):
            writer.key("child"); writer.string(child.description)
        case let .uncovered(child, reason):
            writer.key("child"); writer.string(child.description)
            writer.key("reason"); writer.string(reason.rawValue)
        }
        if let gesture = event.gesture { writer.key("gesture"); self.gesture(gesture, into: &writer) }
        writer.endObject()
    }

    static func gesture(_ gesture: GestureResolution, into writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("releasedHeight"); writer.number(gesture.releasedHeight)
        writer.key("projectedHeight"); writer.number(gesture.projectedHeight)
        writer.key("target"); writer.string(gesture.target.description)
        writer.endObject()
    }

    static func actionBody(_ result: ActionResult) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("session"); session(result.session, into: &writer)
        writer.key("events")
        writer.beginArray()
        for event in result.outcome.events { self.event(event, into: &writer) }
        writer.endArray()
        if let gesture = result.outcome.gesture { writer.key("gesture"); self.gesture(gesture, into: &writer) }
        writer.endObject()
        return writer.bytes
    }

    private static func strings(_ values: [String], into writer: inout JSONWriter) {
        writer.beginArray()
        for value in values { writer.string(value) }
        writer.endArray()
    }

    private static func optional(_ value: String?, into writer: inout JSONWriter) {
        if let value { writer.string(value) } else { writer.null() }
    }

    private static func id(_ id: SessionID?, into writer: inout JSONWriter) {
        if let id { writer.string(id.description) } else { writer.null() }
    }
}

/// Random sessions and actions, at instants from the same millisecond to years apart (the ends
/// of the formattable range and beyond included): every answer `Rendering` writes is the
/// reference's, byte for byte.
@Suite("Rendering matches the reference rendering")
struct RenderingReferenceTests {
    struct Story {
        var random: SeededGenerator

        mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &random)] }

        mutating func detent() -> Detent {
            switch Int.random(in: 0...5, using: &random) {
            case 0, 1: return .large
            case 2, 3: return .medium
            case 4: return .fraction(pick([0.25, 0.3, 0.5, 0.75, 1, 0.123456789]))
            default: return .height(pick([100, 300, 300.5, 420, 1e4, 12.25]))
            }
        }

        /// A valid configuration, tried until one validates.
        mutating func configuration() -> SheetConfiguration {
            while true {
                let detents = (0..<Int.random(in: 1...4, using: &random)).map { _ in detent() }
                let threshold: Detent? = Bool.random(using: &random) ? nil : detent()
                if let configuration = try? SheetConfiguration(
                    detents: detents,
                    defaultDetent: Bool.random(using: &random) ? nil : pick(detents),
                    thresholdDetent: threshold,
                    dismissPolicy: Bool.random(using: &random) ? nil : pick(DismissPolicy.allCases),
                    interceptAction: Bool.random(using: &random) ? nil : pick(InterceptAction.allCases),
                    containerHeight: Bool.random(using: &random) ? nil : pick([844, 390, 932.5, 1, 10_000]),
                    decelerationRate: Bool.random(using: &random) ? nil : pick(DecelerationRate.allCases),
                    protectWhen: Bool.random(using: &random) ? nil : pick(ProtectWhen.allCases),
                    largestUndimmedDetent: Bool.random(using: &random) ? nil : pick(detents),
                    rootScreen: Bool.random(using: &random) ? nil : pick(["root", "form", "a.b-c_d", String(repeating: "x", count: 64)]))
                { return configuration }
            }
        }

        mutating func action() -> SheetAction {
            switch Int.random(in: 0...11, using: &random) {
            case 0, 1: return .drag(Bool.random(using: &random) ? .closed : .detent(detent()))
            case 2, 3: return .gesture(DragGesture(translation: Double(Int.random(in: -800...800, using: &random)) / 4,
                                                   velocity: Double(Int.random(in: -5000...5000, using: &random)) / 3))
            case 4: return .confirm(pick(ConfirmAction.allCases))
            case 5: return .dismiss(pick([AppDismissReason.done, .programmatic]))
            case 6: return .present
            case 7: return .changes(hasChanges: Bool.random(using: &random))
            case 8: return .select(detent())
            case 9: return .resize(containerHeight: pick([390, 844, 700.25, 1, 10_000]))
            case 10: return .navigate(.push(pick(["edit", "list", "z"])))
            default: return .navigate(.pop(Int.random(in: 1...3, using: &random)))
            }
        }

        /// The next instant: often the same millisecond or day, sometimes far away.
        mutating func later(_ now: Int64) -> Int64 {
            switch Int.random(in: 0...9, using: &random) {
            case 0, 1: return now
            case 2, 3, 4: return now + Int64.random(in: 1...2_000, using: &random)
            case 5, 6: return now + Int64.random(in: 1...200_000_000, using: &random)
            case 7: return now + Int64.random(in: 0...86_400_000 * 800, using: &random)
            default: return pick([-62_167_219_200_001, -62_167_219_200_000, -86_400_001, -1, 0, 951_782_400_000, 4_107_542_399_999,
                                  253_402_300_799_999, 253_402_300_800_000, Int64.max / 2, Int64.min / 2])
            }
        }
    }

    static func expectSame(_ got: [UInt8], _ expected: [UInt8], _ what: String) {
        #expect(got == expected, "\(what):\n  \(String(decoding: got, as: UTF8.self))\n  \(String(decoding: expected, as: UTF8.self))")
    }

    @Test func randomStoriesRenderAsTheReference() async throws {
        var story = Story(random: SeededGenerator(seed: 0x5E55_1011))
        // Few configurations, so most renderings are copies of earlier ones; and now and then
        // more than the cache holds.
        var configurations = (0..<4).map { _ in story.configuration() }
        var rendered = 0
        for round in 0..<400 {
            if round % 50 == 49 { configurations += (0..<12).map { _ in story.configuration() } }
            var now = story.later(1_764_422_931_123)
            let id = SessionID(high: UInt64.random(in: 0...UInt64.max, using: &story.random), low: UInt64.random(in: 0...UInt64.max, using: &story.random))
            var sheet = Sheet(configuration: story.pick(configurations), now: Timestamp(millisecondsSince1970: now))
            for _ in 0..<Int.random(in: 1...30, using: &story.random) {
                now = story.later(now)
                guard let outcome = try? sheet.apply(story.action(), now: Timestamp(millisecondsSince1970: now)) else { continue }
                let result = ActionResult(session: SessionSnapshot(id: id, sheet: sheet), outcome: outcome)
                Self.expectSame(Rendering.actionBody(result), ReferenceRendering.actionBody(result), "action body")
                rendered += 1
            }
            let snapshot = SessionSnapshot(id: id, sheet: sheet)
            var reference = JSONWriter()
            ReferenceRendering.session(snapshot, into: &reference)
            Self.expectSame(Rendering.sessionBody(snapshot), reference.bytes, "session body")
            var stored = JSONWriter()
            ReferenceRendering.session(snapshot, into: &stored, events: ArraySlice(sheet.events.suffix(3)))
            Self.expectSame(Array(Rendering.storedSessionText(snapshot, retained: 3).utf8), stored.bytes, "stored session")
            for event in sheet.events.suffix(3) {
                var writer = JSONWriter()
                ReferenceRendering.event(event, into: &writer)
                Self.expectSame(Array(Rendering.eventText(event).utf8), writer.bytes, "event")
            }
            var configuration = JSONWriter()
            ReferenceRendering.configuration(sheet.configuration, into: &configuration)
            Self.expectSame(Array(Rendering.configurationText(sheet.configuration).utf8), configuration.bytes, "configuration")
            await Task.yield()
        }
        #expect(rendered > 2_000, "\(rendered) action answers")
    }

    /// Sessions in a chain: `parent`, `child` and the covering events.
    @Test func chainedSessionsRenderAsTheReference() throws {
        var story = Story(random: SeededGenerator(seed: 0xC4A1_0002))
        let t0 = Timestamp(millisecondsSince1970: 1_764_422_931_123)
        let parentID = SessionID(high: 1, low: 2)
        let childID = SessionID(high: 3, low: 2)
        let parent = Sheet(configuration: story.configuration(), now: t0)
        let chain = try SheetChain.present(childID, configuration: story.configuration(), over: parentID,
                                           in: { $0 == parentID ? parent : nil }, now: t0)
        for change in chain.changes {
            let result = ActionResult(session: SessionSnapshot(id: change.id, sheet: change.sheet), outcome: SheetOutcome(events: change.events))
            Self.expectSame(Rendering.actionBody(result), ReferenceRendering.actionBody(result), "chain answer")
        }
    }
}
