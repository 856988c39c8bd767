import SheetCore
import Testing

/// Issue 5's worked numbers: container 844, large 844, medium 422, threshold height:300.
@Suite struct GestureWorkedNumbers {
    struct Row: Sendable, CustomTestStringConvertible {
        var translation: Double
        var velocity: Double
        var released: Double
        var projected: Double
        var target: String
        var testDescription: String { "T=\(translation) V=\(velocity) → \(target)" }
    }

    @Test(arguments: [
        Row(translation: 400, velocity: 0, released: 444, projected: 444, target: "medium"),
        Row(translation: 100, velocity: 1000, released: 744, projected: 245, target: "height:300"),
        Row(translation: 300, velocity: 3000, released: 544, projected: -953, target: "closed"),
        Row(translation: -50, velocity: -2000, released: 894, projected: 1892, target: "large"),
    ])
    func fromLarge(row: Row) throws {
        let sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let r = sheet.resolve(DragGesture(translation: row.translation, velocity: row.velocity))
        #expect(r == GestureResolution(releasedHeight: row.released, projectedHeight: row.projected,
                                       target: target(row.target)))
    }

    @Test func towardMediumMoves() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let out = mustApply(&sheet, .gesture(DragGesture(translation: 400)), at: tick(1))
        let resolution = GestureResolution(releasedHeight: 444, projectedHeight: 444, target: .detent(.medium))
        #expect(out.gesture == resolution)
        #expect(out.events == [SheetEvent(seq: 2, at: tick(1), kind: .detentChanged(from: .large, to: .medium, by: .user),
                                          gesture: resolution)])
        #expect(sheet.detent == .medium)
    }

    @Test func flickPastTheThresholdIsIntercepted() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let out = mustApply(&sheet, .gesture(DragGesture(translation: 100, velocity: 1000)))
        #expect(kinds(out) == [.intercepted(attempted: .detent(.height(300)), restoredTo: .large)])
        #expect(out.events.first?.gesture?.target == .detent(.height(300)))
        #expect(sheet.phase == .confirming)
        #expect(sheet.detent == .large)
    }

    @Test(arguments: DismissPolicy.allCases)
    func hardFlickClosesByPolicy(policy: DismissPolicy) throws {
        let config = try SheetConfiguration(detents: [.large, .medium], dismissPolicy: policy)
        var sheet = Sheet(configuration: config, now: t0)
        let out = mustApply(&sheet, .gesture(DragGesture(translation: 300, velocity: 3000)))
        #expect(out.gesture?.target == .closed)
        #expect(out.events.allSatisfy { $0.gesture == out.gesture })
        switch policy {
        case .allow: #expect(kinds(out) == [.dismissed(reason: .swipe, screen: "root")])
        case .intercept: #expect(kinds(out) == [.intercepted(attempted: .closed, restoredTo: .large)])
        case .block: #expect(kinds(out) == [.dismissBlocked(attempted: .closed)])
        }
    }

    @Test func upwardFlickAtLargeIsANoOpButStillAnswersTheGesture() throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        let before = sheet
        let out = mustApply(&sheet, .gesture(DragGesture(translation: -50, velocity: -2000)))
        #expect(out.events.isEmpty)
        #expect(out.gesture == GestureResolution(releasedHeight: 894, projectedHeight: 1892, target: .detent(.large)))
        #expect(sheet == before)
    }

    @Test func tieBetweenClosedAndMediumStaysAtMedium() throws {
        let config = try SheetConfiguration(detents: [.medium, .large], defaultDetent: .medium)
        var sheet = Sheet(configuration: config, now: t0)
        let out = mustApply(&sheet, .gesture(DragGesture(translation: 211)))
        #expect(out.gesture == GestureResolution(releasedHeight: 211, projectedHeight: 211, target: .detent(.medium)))
        #expect(out.events.isEmpty)
        #expect(sheet.detent == .medium)
        // one hair further down and closed is nearer
        #expect(sheet.resolve(DragGesture(translation: 211.001)).target == .closed)
    }

    @Test func tieBetweenEqualHeightsGoesToTheLaterDetent() throws {
        // height:1000 and large both resolve to 844; the later one in sorted order, large, wins.
        let config = try SheetConfiguration(detents: [.medium, .height(1000), .large], defaultDetent: .medium)
        var sheet = Sheet(configuration: config, now: t0)
        #expect(sheet.resolve(DragGesture(translation: -1000)).target == .detent(.large))
        // ...unless the sheet already rests at one of them: then it stays put.
        mustApply(&sheet, .drag(.detent(.height(1000))))
        #expect(sheet.resolve(DragGesture(translation: -1000)).target == .detent(.height(1000)))
        #expect(sheet.resolve(DragGesture(translation: 0)).target == .detent(.height(1000)))
        #expect(sheet.resolve(DragGesture(translation: 422)).target == .detent(.medium))
    }

    @Test func fastDecelerationProjectsLess() throws {
        let config = try SheetConfiguration(detents: [.large, .medium], decelerationRate: .fast)
        let sheet = Sheet(configuration: config, now: t0)
        // V=1000 projects 99 points, not 499: from 844−300=544 the sheet lands at medium, not closed.
        let r = sheet.resolve(DragGesture(translation: 300, velocity: 1000))
        #expect(r.projectedHeight == 445)
        #expect(r.target == .detent(.medium))
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e300])
    func nonFiniteOrHugeInputNeverCrashes(value: Double) throws {
        var sheet = Sheet(configuration: try seedConfiguration(), now: t0)
        for g in [DragGesture(translation: value), DragGesture(translation: 0, velocity: value)] {
            let r = sheet.resolve(g)
            #expect(r.releasedHeight.isFinite && r.projectedHeight.isFinite)
            #expect(!g.isValid)
        }
        _ = try? sheet.apply(.gesture(DragGesture(translation: value, velocity: value)), now: t0)
        #expect(sheet.version >= 1)
    }

    @Test func validity() {
        #expect(DragGesture(translation: 100_000, velocity: -100_000).isValid)
        #expect(!DragGesture(translation: 100_000.5).isValid)
        #expect(DragGesture(translation: 1).velocity == 0)
    }
}

/// Random gestures over random configurations: the rule's promises, checked in bulk.
@Suite struct GestureProperties {
    static let pool: [Detent] = [.large, .medium, .fraction(0.25), .fraction(0.75), .fraction(0.5),
                                 .height(300), .height(120), .height(1000), .height(650.5)]

    static func randomSheet(_ rng: inout SplitMix64, rate: DecelerationRate? = nil) -> Sheet? {
        var chosen = pool.filter { _ in rng.next() % 2 == 0 }
        if chosen.isEmpty { chosen = [.large] }
        let container = Double(200 + rng.next() % 1200)
        guard let config = try? SheetConfiguration(
            detents: chosen,
            thresholdDetent: rng.next() % 3 == 0 ? .height(40) : nil,
            containerHeight: container,
            decelerationRate: rate ?? (rng.next() % 2 == 0 ? .normal : .fast))
        else { return nil }
        var sheet = Sheet(configuration: config, now: t0)
        // start from a random resting detent
        let resting = config.detents.filter { $0 != config.thresholdDetent }
        let start = resting[Int(rng.next() % UInt64(resting.count))]
        _ = try? sheet.apply(.drag(.detent(start)), now: t0)
        return sheet
    }

    static func value(_ rng: inout SplitMix64, _ limit: Double) -> Double {
        Double(rng.next() % 2_000_001) / 1_000_000 * 2 * limit - limit   // [-limit, limit]
    }

    /// Height of where a target lands: closed is 0.
    static func height(_ t: DragTarget, _ sheet: Sheet) -> Double {
        switch t {
        case .closed: 0
        case .detent(let d): d.resolvedHeight(containerHeight: sheet.configuration.containerHeight)
        }
    }

    @Test func targetNeverGetsTallerAsTranslationOrVelocityGrows() {
        var rng = SplitMix64(seed: 0x5EED_0001)
        var checked = 0
        for _ in 0..<400 {
            guard let sheet = Self.randomSheet(&rng) else { continue }
            for _ in 0..<50 {
                let t1 = Self.value(&rng, 2000), t2 = Self.value(&rng, 2000)
                let v1 = Self.value(&rng, 5000), v2 = Self.value(&rng, 5000)
                let (tLow, tHigh) = (min(t1, t2), max(t1, t2))
                let (vLow, vHigh) = (min(v1, v2), max(v1, v2))
                let base = sheet.resolve(DragGesture(translation: tLow, velocity: vLow)).target
                let moreT = sheet.resolve(DragGesture(translation: tHigh, velocity: vLow)).target
                let moreV = sheet.resolve(DragGesture(translation: tLow, velocity: vHigh)).target
                if Self.height(moreT, sheet) > Self.height(base, sheet) || Self.height(moreV, sheet) > Self.height(base, sheet) {
                    Issue.record("not monotonic: \(sheet.configuration.detents) from \(sheet.detent) T \(tLow)→\(tHigh) V \(vLow)→\(vHigh)")
                    return
                }
                checked += 1
            }
        }
        #expect(checked > 10_000)
    }

    @Test func zeroGestureNeverMoves() {
        var rng = SplitMix64(seed: 0x5EED_0002)
        for _ in 0..<1000 {
            guard var sheet = Self.randomSheet(&rng) else { continue }
            let before = sheet
            let r = sheet.resolve(DragGesture(translation: 0, velocity: 0))
            #expect(r.target == .detent(sheet.detent))
            #expect(r.releasedHeight == r.projectedHeight)
            let out = try? sheet.apply(.gesture(DragGesture(translation: 0)), now: tick(1))
            #expect(out?.events.isEmpty == true)
            #expect(sheet == before)
        }
    }

    @Test func fastNeverProjectsFartherThanNormal() {
        var rng = SplitMix64(seed: 0x5EED_0003)
        for _ in 0..<300 {
            let seed = rng.next()
            var a = SplitMix64(seed: seed), b = SplitMix64(seed: seed)
            guard let normal = Self.randomSheet(&a, rate: .normal), let fast = Self.randomSheet(&b, rate: .fast) else { continue }
            #expect(normal.detent == fast.detent)
            for _ in 0..<40 {
                let g = DragGesture(translation: Self.value(&rng, 2000), velocity: Self.value(&rng, 100_000))
                let n = normal.resolve(g), f = fast.resolve(g)
                #expect(n.releasedHeight == f.releasedHeight)
                #expect(abs(f.projectedHeight - f.releasedHeight) <= abs(n.projectedHeight - n.releasedHeight))
                // both project the same way (up or down) from the same release
                #expect((f.projectedHeight - f.releasedHeight) * (n.projectedHeight - n.releasedHeight) >= 0)
            }
        }
    }

    @Test func targetIsTheNearestCandidate() {
        var rng = SplitMix64(seed: 0x5EED_0004)
        for _ in 0..<300 {
            guard let sheet = Self.randomSheet(&rng) else { continue }
            let heights = [0.0] + sheet.configuration.detents.map { $0.resolvedHeight(containerHeight: sheet.configuration.containerHeight) }
            for _ in 0..<40 {
                let r = sheet.resolve(DragGesture(translation: Self.value(&rng, 3000), velocity: Self.value(&rng, 6000)))
                let best = heights.map { abs($0 - r.projectedHeight) }.min()!
                // projectedHeight is reported to a millionth of a point, hence the tolerance
                #expect(abs(abs(Self.height(r.target, sheet) - r.projectedHeight) - best) <= 1e-6)
            }
        }
    }
}
