import SheetCore
import Testing

// An independent reference model of SHEET-SEMANTICS.md, written from the document with plain
// strings and arrays: no SheetCore logic is reused (SheetCore types appear only to compare).

struct ModelConfig {
    var container: Double
    var detents: [String]          // sorted by height, then string
    var defaultDetent: String
    var threshold: String?
    var policy: String             // allow | intercept | block
    var confirm: Bool              // interceptAction confirm (else notify)
    var factor: Double             // d / (1 − d): 0.998 → 499, 0.99 → 99

    func height(_ d: String) -> Double {
        if d == "large" { return container }
        if d == "medium" { return container / 2 }
        if d.hasPrefix("fraction:") { return container * Double(d.dropFirst(9))! }
        return min(Double(d.dropFirst(7))!, container)
    }
}

struct ModelEvent {
    var seq: UInt64
    var type: String
    var fields: [String]           // values in the order the semantics lists them
    var gesture: GestureResolution?
    var expected: SheetEvent       // the same event as SheetCore should record it, built once
}

enum ModelAction {
    case drag(String), gesture(Double, Double), confirm(String), dismiss(String), present
}

struct Model {
    let config: ModelConfig
    var phase = "presented"
    var detent: String
    var presentation = 1
    var reason: String?
    var version: UInt64 = 1
    var log: [ModelEvent] = []

    init(config: ModelConfig, now: Timestamp) {
        self.config = config
        detent = config.defaultDetent
        record("presented", [detent, "1"], nil, now)
    }

    /// nil on success (events appended), or the error code the semantics require.
    mutating func apply(_ action: ModelAction, now: Timestamp) -> (error: String?, gesture: GestureResolution?) {
        switch action {
        case .drag(let to):
            if to != "closed" && !config.detents.contains(to) { return ("unknown_detent", nil) }
            if let e = dragConflict() { return (e, nil) }
            land(to, attempted: to, gesture: nil, now)
            return (nil, nil)
        case .gesture(let t, let v):
            if let e = dragConflict() { return (e, nil) }
            let h0 = config.height(detent)
            let r = h0 - t
            let p = r - v * config.factor / 1000
            var best = "closed", bestHeight = 0.0, bestDistance = abs(p)
            for d in config.detents {
                let distance = abs(p - config.height(d))
                if distance <= bestDistance { (best, bestHeight, bestDistance) = (d, config.height(d), distance) }
            }
            if bestHeight == h0 { best = detent }   // the same place on screen as now: stay
            let g = GestureResolution(releasedHeight: micro(r), projectedHeight: micro(p), target: SheetCoreTests.target(best))
            land(best, attempted: best, gesture: g, now)
            return (nil, g)
        case .confirm(let answer):
            guard phase == "confirming" else { return ("no_pending_confirmation", nil) }
            if answer == "cancel" {
                phase = "presented"
                record("confirmationCancelled", [detent], nil, now)
            } else {
                dismiss(answer == "discard" ? "discarded" : "saved", nil, now)
            }
            return (nil, nil)
        case .dismiss(let why):
            guard phase != "dismissed" else { return ("sheet_dismissed", nil) }
            dismiss(why, nil, now)
            return (nil, nil)
        case .present:
            guard phase == "dismissed" else { return ("sheet_presented", nil) }
            phase = "presented"
            reason = nil
            detent = config.defaultDetent
            presentation += 1
            record("presented", [detent, String(presentation)], nil, now)
            return (nil, nil)
        }
    }

    func dragConflict() -> String? {
        switch phase {
        case "confirming": "confirmation_pending"
        case "dismissed": "sheet_dismissed"
        default: nil
        }
    }

    mutating func land(_ to: String, attempted: String, gesture: GestureResolution?, _ now: Timestamp) {
        if to == detent { return }
        if to == config.threshold || (to == "closed" && config.policy == "intercept") {
            if config.confirm { phase = "confirming" }
            record("intercepted", [attempted, detent], gesture, now)
        } else if to == "closed" {
            if config.policy == "allow" {
                dismiss("swipe", gesture, now)
            } else {
                record("dismissBlocked", ["closed"], gesture, now)
            }
        } else {
            let from = detent
            detent = to
            record("detentChanged", [from, to], gesture, now)
        }
    }

    mutating func dismiss(_ why: String, _ gesture: GestureResolution?, _ now: Timestamp) {
        phase = "dismissed"
        reason = why
        record("dismissed", [why], gesture, now)
    }

    mutating func record(_ type: String, _ fields: [String], _ gesture: GestureResolution?, _ now: Timestamp) {
        let seq = log.isEmpty ? 1 : version + 1
        version = seq
        let kind: SheetEvent.Kind = switch type {
        case "presented": .presented(detent: SheetCoreTests.detent(fields[0]), presentation: Int(fields[1])!)
        case "detentChanged": .detentChanged(from: SheetCoreTests.detent(fields[0]), to: SheetCoreTests.detent(fields[1]))
        case "intercepted": .intercepted(attempted: SheetCoreTests.target(fields[0]), restoredTo: SheetCoreTests.detent(fields[1]))
        case "confirmationCancelled": .confirmationCancelled(detent: SheetCoreTests.detent(fields[0]))
        case "dismissBlocked": .dismissBlocked(attempted: SheetCoreTests.target(fields[0]))
        default: .dismissed(reason: DismissReason(rawValue: fields[0])!)
        }
        log.append(ModelEvent(seq: seq, type: type, fields: fields, gesture: gesture,
                              expected: SheetEvent(seq: seq, at: now, kind: kind, gesture: gesture)))
        if log.count > 256 { log.removeFirst() }
    }

    func micro(_ x: Double) -> Double { (x * 1_000_000).rounded() / 1_000_000 }
}

@Suite struct ReferenceModel {
    static let pool = ["large", "medium", "fraction:0.25", "fraction:0.5", "fraction:0.75", "fraction:1",
                       "height:300", "height:120", "height:650.5", "height:1000", "height:2000"]
    static let thresholds = ["height:40", "fraction:0.01"]

    /// A random configuration, or nil when SheetCore rightly refuses it (checked against the rules).
    static func randomConfig(_ rng: inout SplitMix64) -> (SheetConfiguration, ModelConfig)? {
        let container = [844.0, 500, 1200, 375.5][Int(rng.next() % 4)]
        var given = pool.filter { _ in rng.next() % 3 == 0 }
        if given.isEmpty { given = [pool[Int(rng.next() % UInt64(pool.count))]] }
        let threshold: String? = rng.next() % 2 == 0 ? thresholds[Int(rng.next() % 2)] : nil
        let explicitDefault: String? = rng.next() % 3 == 0 ? given[Int(rng.next() % UInt64(given.count))] : nil
        let policy: String = switch rng.next() % 4 {
        case 0: "allow"
        case 1: "intercept"
        case 2: "block"
        default: threshold == nil ? "allow" : "intercept"   // the documented default
        }
        let givenPolicy = rng.next() % 2 == 0 ? DismissPolicy(rawValue: policy) : nil
        let effectivePolicy = givenPolicy?.rawValue ?? (threshold == nil ? "allow" : "intercept")
        let confirm = rng.next() % 3 != 0
        let fast = rng.next() % 4 == 0

        var model = ModelConfig(container: container, detents: [], defaultDetent: "", threshold: threshold,
                                policy: effectivePolicy, confirm: confirm, factor: fast ? 99 : 499)
        var set: [String] = []
        for d in given + [explicitDefault, threshold].compactMap({ $0 }) where !set.contains(d) { set.append(d) }
        set.sort { (model.height($0), $0) < (model.height($1), $1) }
        model.detents = set
        model.defaultDetent = explicitDefault ?? set.last!

        let made = try? SheetConfiguration(
            detents: given.map(detent), defaultDetent: explicitDefault.map(detent),
            thresholdDetent: threshold.map(detent), dismissPolicy: givenPolicy,
            interceptAction: confirm ? .confirm : .notify, containerHeight: container,
            decelerationRate: fast ? .fast : nil)
        // The model's own verdict on validity.
        var valid = !(threshold != nil && effectivePolicy == "allow")
        if let t = threshold {
            valid = valid && model.defaultDetent != t
                && set.allSatisfy { $0 == t || model.height($0) > model.height(t) }
        }
        #expect((made != nil) == valid, "validity of \(given) default \(explicitDefault ?? "-") threshold \(threshold ?? "-") \(effectivePolicy)")
        guard let made else { return nil }
        #expect(made.detents.map(\.description) == model.detents)
        #expect(made.defaultDetent.description == model.defaultDetent)
        #expect(made.dismissPolicy.rawValue == model.policy)
        return (made, model)
    }

    static func randomAction(_ rng: inout SplitMix64, _ model: Model) -> ModelAction {
        switch rng.next() % 100 {
        case 0..<35:
            let choices = model.config.detents + ["closed", "closed", "height:777"]
            return .drag(choices[Int(rng.next() % UInt64(choices.count))])
        case 35..<55:
            // half exact ties (release at a midpoint between two candidates), half arbitrary
            let heights = [0.0] + model.config.detents.map(model.config.height)
            let h0 = model.config.height(model.detent)
            if rng.next() % 2 == 0 {
                let a = heights[Int(rng.next() % UInt64(heights.count))], b = heights[Int(rng.next() % UInt64(heights.count))]
                return .gesture(h0 - (a + b) / 2, 0)
            }
            let t = Double(Int64(rng.next() % 2_000_001) - 1_000_000) / 1000
            let v = rng.next() % 3 == 0 ? 0 : Double(Int64(rng.next() % 8_001) - 4000)
            return .gesture(t, v)
        case 55..<75:
            return .confirm(["discard", "save", "cancel"][Int(rng.next() % 3)])
        case 75..<87:
            return .dismiss(rng.next() % 2 == 0 ? "done" : "programmatic")
        default:
            return .present
        }
    }

    static func sheetAction(_ a: ModelAction) -> SheetAction {
        switch a {
        case .drag(let to): .drag(target(to))
        case .gesture(let t, let v): .gesture(DragGesture(translation: t, velocity: v))
        case .confirm(let c): .confirm(ConfirmAction(rawValue: c)!)
        case .dismiss(let r): .dismiss(AppDismissReason(rawValue: r)!)
        case .present: .present
        }
    }

    /// Runs `sequences` random sessions of `steps` actions from `seed`; returns steps checked.
    static func run(seed: UInt64, sequences: Int, steps: Int) -> Int {
        var rng = SplitMix64(seed: seed)
        var checked = 0
        for sequence in 0..<sequences {
            guard let (configuration, modelConfig) = randomConfig(&rng) else { continue }
            var clock = t0.millisecondsSince1970
            var sheet = Sheet(configuration: configuration, now: t0)
            var model = Model(config: modelConfig, now: t0)
            for step in 0..<steps {
                clock += Int64(rng.next() % 5000)
                let now = Timestamp(millisecondsSince1970: clock)
                let action = randomAction(&rng, model)
                let before = sheet
                let versionBefore = sheet.version
                let expected = model.apply(action, now: now)
                let context = "seed \(seed) sequence \(sequence) step \(step): \(action)"
                do {
                    let outcome = try sheet.apply(sheetAction(action), now: now)
                    if let code = expected.error { Issue.record("\(context): model refused with \(code), SheetCore accepted"); return checked }
                    let produced = model.log.filter { $0.seq > versionBefore }.map(\.expected)
                    guard outcome.events == produced, outcome.gesture == expected.gesture else {
                        Issue.record("\(context): events \(outcome.events) gesture \(String(describing: outcome.gesture)), model \(produced) \(String(describing: expected.gesture))")
                        return checked
                    }
                    // seq strictly +1 from the previous version
                    for (i, e) in outcome.events.enumerated() where e.seq != versionBefore + UInt64(i) + 1 {
                        Issue.record("\(context): seq \(e.seq) does not follow \(versionBefore)"); return checked
                    }
                } catch {
                    guard expected.error == error.code.rawValue else {
                        Issue.record("\(context): SheetCore refused with \(error.code.rawValue), model said \(expected.error ?? "ok")"); return checked
                    }
                    guard sheet == before else { Issue.record("\(context): state changed on error"); return checked }
                }
                // The two agree on the whole observable state...
                guard sheet.phase.rawValue == model.phase,
                      sheet.detent.description == model.detent,
                      sheet.version == model.version,
                      sheet.presentation == model.presentation,
                      sheet.dismissReason?.rawValue == model.reason,
                      sheet.events.count == model.log.count,
                      sheet.events.elementsEqual(model.log.lazy.map(\.expected))
                else {
                    Issue.record("\(context): state differs: \(sheet.phase) \(sheet.detent) v\(sheet.version) p\(sheet.presentation) \(String(describing: sheet.dismissReason)) vs model \(model.phase) \(model.detent) v\(model.version) p\(model.presentation) \(model.reason ?? "nil")")
                    return checked
                }
                // ...and the invariants hold.
                let log = sheet.events
                let invariants = sheet.version == log.last!.seq
                    && zip(log, log.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 }
                    && (sheet.phase == .dismissed) == (sheet.dismissReason != nil)
                    && configuration.detents.contains(sheet.detent)
                    && sheet.detent != configuration.thresholdDetent
                    && log.count <= Sheet.retainedEvents
                    && sheet.updatedAt == log.last!.at
                guard invariants else { Issue.record("\(context): invariant broken"); return checked }
                checked += 1
            }
        }
        return checked
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func shortSessions(seed: UInt64) {
        #expect(Self.run(seed: seed, sequences: 1000, steps: 30) > 10_000)
    }

    /// Long sessions wrap the 256-event ring many times.
    @Test func longSessions() {
        #expect(Self.run(seed: 0xB16, sequences: 12, steps: 1500) > 5000)
    }

    @Test func reproducible() {
        var a = SplitMix64(seed: 42), b = SplitMix64(seed: 42)
        #expect((0..<100).map { _ in a.next() } == (0..<100).map { _ in b.next() })
    }
}
