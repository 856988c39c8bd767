import SheetCore
import Testing

/// SheetCore against the reference model (ReferenceModel.swift): random worlds of sessions,
/// flat or in chains of up to 8, driven by random actions; after every step both agree on every
/// session's whole observable state and log, and the invariants hold.
@Suite struct ReferenceModel {
    static let pool = ["large", "medium", "fraction:0.25", "fraction:0.5", "fraction:0.75", "fraction:1",
                       "height:300", "height:120", "height:650.5", "height:1000", "height:2000"]
    static let thresholds = ["height:40", "fraction:0.01", "height:300"]
    static let screens = ["root", "home", "detail", "a.b", "x_y-z", "Settings2"]

    static func pick<T>(_ rng: inout SplitMix64, _ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }

    /// A random configuration, or nil when SheetCore rightly refuses it (checked against the rules).
    static func randomConfig(_ rng: inout SplitMix64) -> (SheetConfiguration, ModelConfig)? {
        let container = pick(&rng, [844.0, 500, 1200, 375.5])
        var given = pool.filter { _ in rng.next() % 3 == 0 }
        if given.isEmpty { given = [pick(&rng, pool)] }
        let threshold: String? = rng.next() % 2 == 0 ? pick(&rng, thresholds) : nil
        let explicitDefault: String? = rng.next() % 3 == 0 ? pick(&rng, given) : nil
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
        let protectWhen: String? = switch rng.next() % 4 {
        case 0: "always"
        case 1, 2: effectivePolicy == "allow" && rng.next() % 4 != 0 ? nil : "hasChanges"
        default: nil
        }
        let undimmed: String? = rng.next() % 3 == 0 ? (rng.next() % 8 == 0 ? pick(&rng, pool + thresholds) : pick(&rng, given)) : nil
        let root: String? = switch rng.next() % 8 {
        case 0: "bad name"
        case 1, 2: pick(&rng, screens)
        default: nil
        }

        var model = ModelConfig(container: container, detents: [], defaultDetent: "", threshold: threshold,
                                policy: effectivePolicy, confirm: confirm, factor: fast ? 99 : 499,
                                protectWhen: protectWhen ?? "always", undimmed: undimmed, root: root ?? "root")
        var set: [String] = []
        for d in given + [explicitDefault, threshold].compactMap({ $0 }) where !set.contains(d) { set.append(d) }
        model.detents = set
        set = model.ordered(at: container)
        model.detents = set
        model.defaultDetent = explicitDefault ?? set.last!

        let made = try? SheetConfiguration(
            detents: given.map(detent), defaultDetent: explicitDefault.map(detent),
            thresholdDetent: threshold.map(detent), dismissPolicy: givenPolicy,
            interceptAction: confirm ? .confirm : .notify, containerHeight: container,
            decelerationRate: fast ? .fast : nil, protectWhen: protectWhen.map { ProtectWhen(rawValue: $0)! },
            largestUndimmedDetent: undimmed.map(detent), rootScreen: root)
        // The model's own verdict on validity.
        var valid = !(threshold != nil && effectivePolicy == "allow")
        if let t = threshold {
            valid = valid && model.defaultDetent != t
                && set.allSatisfy { $0 == t || model.height($0) > model.height(t) }
        }
        valid = valid && !(model.protectWhen == "hasChanges" && effectivePolicy == "allow")
        if let u = undimmed { valid = valid && set.contains(u) && u != threshold }
        valid = valid && model.root != "bad name"
        #expect((made != nil) == valid, "validity of \(given) default \(explicitDefault ?? "-") threshold \(threshold ?? "-") \(effectivePolicy) protect \(model.protectWhen) undimmed \(undimmed ?? "-") root \(model.root)")
        guard let made else { return nil }
        #expect(made.detents.map(\.description) == model.detents)
        #expect(made.defaultDetent.description == model.defaultDetent)
        #expect(made.dismissPolicy.rawValue == model.policy)
        return (made, model)
    }

    static func randomAction(_ rng: inout SplitMix64, _ s: ModelSheet) -> ModelAction {
        let c = s.config
        switch rng.next() % 100 {
        case 0..<26:
            return .drag(pick(&rng, c.detents + ["closed", "closed", "height:777"]))
        case 26..<40:
            // half exact ties (release at a midpoint between two candidates), half arbitrary
            let heights = [0.0] + c.detents.map(s.height)
            let h0 = s.height(s.detent)
            if rng.next() % 2 == 0 {
                let a = pick(&rng, heights), b = pick(&rng, heights)
                return .gesture(h0 - (a + b) / 2, 0)
            }
            let t = Double(Int64(rng.next() % 2_000_001) - 1_000_000) / 1000
            let v = rng.next() % 3 == 0 ? 0 : Double(Int64(rng.next() % 8_001) - 4000)
            return .gesture(t, v)
        case 40..<52:
            return .confirm(pick(&rng, ["discard", "save", "cancel"]))
        case 52..<58:
            return .dismiss(rng.next() % 2 == 0 ? "done" : "programmatic")
        case 58..<66:
            return .present
        case 66..<73:
            return .changes(rng.next() % 2 == 0)
        case 73..<80:
            return .select(pick(&rng, c.detents + ["height:777"]))
        case 80..<87:
            return .resize(pick(&rng, [844.0, 390, 500, 1200, 375.5, 100, 60, 30, 1, 10_000, 0, 10_001, .nan, s.container]))
        case 87..<94:
            return .push(pick(&rng, screens + ["", "no/slash", String(repeating: "q", count: 65)]))
        default:
            return .pop(Int(rng.next() % 4) - 1 + (rng.next() % 8 == 0 ? 40 : 0))
        }
    }

    static func sheetAction(_ a: ModelAction) -> SheetAction {
        switch a {
        case .drag(let to): .drag(target(to))
        case .gesture(let t, let v): .gesture(DragGesture(translation: t, velocity: v))
        case .confirm(let c): .confirm(ConfirmAction(rawValue: c)!)
        case .dismiss(let r): .dismiss(AppDismissReason(rawValue: r)!)
        case .present: .present
        case .changes(let value): .changes(hasChanges: value)
        case .select(let d): .select(detent(d))
        case .resize(let h): .resize(containerHeight: h)
        case .push(let name): .navigate(.push(name))
        case .pop(let k): .navigate(.pop(k))
        }
    }

    /// The whole observable state of one session, and the invariants, against the model.
    static func agree(_ n: Int, _ sheet: Sheet, _ m: ModelSheet, _ sheets: [SessionID: Sheet]) -> String? {
        guard sheet.phase.rawValue == m.phase, sheet.detent.description == m.detent, sheet.version == m.version,
              sheet.presentation == m.presentation, sheet.dismissReason?.rawValue == m.reason,
              sheet.hasChanges == m.hasChanges, sheet.containerHeight == m.container, sheet.stack == m.stack,
              sheet.parent == m.parent.map(ModelWorld.id), sheet.child == m.child.map(ModelWorld.id),
              sheet.thresholdActive == m.thresholdActive, sheet.dimmed == m.dimmed,
              sheet.backgroundInteractive == !m.dimmed,
              sheet.heights.map(\.detent.description) == m.config.ordered(at: m.container),
              sheet.heights.allSatisfy({ $0.points == m.height($0.detent.description) }),
              sheet.events.elementsEqual(m.log)
        else {
            return "session \(n) differs: \(sheet.phase) \(sheet.detent) v\(sheet.version) changes \(sheet.hasChanges) h\(sheet.containerHeight) \(sheet.stack) child \(String(describing: sheet.child)) vs model \(m.phase) \(m.detent) v\(m.version) changes \(m.hasChanges) h\(m.container) \(m.stack) child \(String(describing: m.child))"
        }
        let log = sheet.events
        let ok = sheet.version == log.last!.seq
            && zip(log, log.dropFirst()).allSatisfy { $1.seq == $0.seq + 1 }
            && (sheet.phase == .dismissed) == (sheet.dismissReason != nil)
            && sheet.configuration.detents.contains(sheet.detent)
            && sheet.detent != sheet.configuration.thresholdDetent
            && log.count <= Sheet.retainedEvents
            && sheet.updatedAt == log.last!.at
            && !sheet.stack.isEmpty
        guard ok else { return "session \(n): its own invariants broken" }
        // A covered sheet's child is presented over it (on screen: `presented`, or `confirming`
        // when the top sheet intercepted a swipe and asks its question).
        if let c = sheet.child, sheets[c] == nil || sheets[c]?.phase == .dismissed || sheets[c]?.parent != ModelWorld.id(n) {
            return "session \(n) is covered by \(c), which is \(sheets[c].map { "\($0.phase)" } ?? "missing")"
        }
        // No presented sheet has a dismissed or missing parent: its parent is presented (a covered
        // sheet takes no drag, so it never asks a question) and covered by it.
        if let p = sheet.parent, sheet.phase != .dismissed,
           sheets[p]?.phase != .presented || sheets[p]?.child != ModelWorld.id(n) {
            return "session \(n) is \(sheet.phase) over \(p), which is \(sheets[p].map { "\($0.phase) covered by \(String(describing: $0.child))" } ?? "missing")"
        }
        // A dismissed sheet has a screen: its dismissal names the top of its stack.
        if sheet.phase == .dismissed, let last = log.last(where: { $0.kind.type == .dismissed }),
           case .dismissed(_, let screen) = last.kind, screen != sheet.stack.last {
            return "session \(n) was dismissed from \(screen), its stack is \(sheet.stack)"
        }
        return nil
    }

    /// What a run covered, so a test can tell that the generator reached the cases it is for.
    struct Coverage {
        var checked = 0
        var deepest = 0
        var refusals: Set<String> = []
        /// The most sessions one step changed (a cascade, or a creation covering a parent).
        var widestChange = 0
    }

    /// Runs `worlds` random worlds of `steps` steps from `seed`.
    /// `chains`: whether sessions are created over others (up to 8 deep) and deleted.
    /// It is seconds of CPU on the cooperative pool (two threads on two cores), so it yields at
    /// each world and every 64 steps: other suites' tasks (a sweep their test waits on) get turns.
    static func run(seed: UInt64, worlds: Int, steps: Int, chains: Bool) async -> Coverage {
        var rng = SplitMix64(seed: seed)
        var coverage = Coverage()

        for world in 0..<worlds {
            await Task.yield()
            var model = ModelWorld()
            var sheets: [SessionID: Sheet] = [:]
            var next = 1
            var clock = t0.millisecondsSince1970
            for step in 0..<steps {
                if step % 64 == 63 { await Task.yield() }
                clock += Int64(rng.next() % 5000)
                let now = Timestamp(millisecondsSince1970: clock)
                model.now = now
                model.touched = []
                let before = sheets
                let live = model.sheets.keys.sorted()
                let roll = rng.next() % 100
                var context = "seed \(seed) world \(world) step \(step): "
                var produced: [ChainChange] = []
                var answer: SheetOutcome?
                var expected: (error: String?, gesture: GestureResolution?) = (nil, nil)
                var sheetError: SheetError?

                if live.isEmpty || roll < (chains ? 6 : 0) || (!chains && roll < 2 && live.count < 3) {
                    guard let (configuration, config) = randomConfig(&rng) else { continue }
                    context += "create \(next)"
                    let sheet = Sheet(configuration: configuration, now: now)
                    sheets[ModelWorld.id(next)] = sheet
                    produced = [ChainChange(id: ModelWorld.id(next), sheet: sheet, events: Array(sheet.events))]
                    model.createRoot(next, config)
                    next += 1
                } else if chains && roll < 22 {
                    guard let (configuration, config) = randomConfig(&rng) else { continue }
                    // Mostly over the top of a chain, sometimes anywhere (or nowhere).
                    let tops = live.filter { model.sheets[$0]!.child == nil && model.sheets[$0]!.phase == "presented" }
                    let over = rng.next() % 10 == 0 ? 9999 : (tops.isEmpty || rng.next() % 4 == 0 ? pick(&rng, live) : pick(&rng, tops))
                    context += "child \(next) over \(over)"
                    expected.error = model.createChild(next, over: over, config)
                    let current = sheets
                    do {
                        let out = try SheetChain.present(ModelWorld.id(next), configuration: configuration, over: ModelWorld.id(over),
                                                         in: { current[$0] }, now: now)
                        produced = out.changes
                        answer = out.outcome
                    } catch { sheetError = error }
                    next += 1
                } else if chains && roll < 25 {
                    let n = pick(&rng, live)
                    context += "delete \(n)"
                    let current = sheets
                    produced = SheetChain.delete(ModelWorld.id(n), current[ModelWorld.id(n)]!, in: { current[$0] }, now: now)
                    // The store's part: the session and every descendant go.
                    var doomed = [ModelWorld.id(n)]
                    var i = 0
                    while i < doomed.count {
                        doomed += sheets.filter { $0.value.parent == doomed[i] }.map(\.key)
                        i += 1
                    }
                    for d in doomed { sheets[d] = nil }
                    model.delete(n)
                } else {
                    // Mostly the top of a chain, where most things happen.
                    var n = pick(&rng, live)
                    while rng.next() % 3 != 0, let c = model.sheets[n]!.child { n = c }
                    let action = randomAction(&rng, model.sheets[n]!)
                    context += "\(action) on \(n)"
                    expected = model.apply(action, to: n)
                    let current = sheets
                    do {
                        let out = try SheetChain.apply(sheetAction(action), to: ModelWorld.id(n), current[ModelWorld.id(n)]!,
                                                       in: { current[$0] }, now: now)
                        produced = out.changes
                        answer = out.outcome
                        let own = model.sheets[n]!.log.filter { $0.seq > current[ModelWorld.id(n)]!.version }
                        guard out.outcome.events == own, out.outcome.gesture == expected.gesture else {
                            Issue.record("\(context): answer \(out.outcome), model \(own) \(String(describing: expected.gesture))")
                            return coverage
                        }
                    } catch { sheetError = error }
                }

                if let sheetError {
                    guard expected.error == sheetError.code.rawValue else {
                        Issue.record("\(context): SheetCore refused with \(sheetError.code.rawValue), model said \(expected.error ?? "ok")")
                        return coverage
                    }
                    guard sheets == before else { Issue.record("\(context): state changed on error"); return coverage }
                } else if let code = expected.error, answer != nil || !produced.isEmpty {
                    Issue.record("\(context): model refused with \(code), SheetCore accepted")
                    return coverage
                }
                // One change: every touched session, in the order its first event was recorded.
                guard produced.map(\.id) == model.touched.map(ModelWorld.id) else {
                    Issue.record("\(context): changed \(produced.map(\.id)), model touched \(model.touched)")
                    return coverage
                }
                for change in produced {
                    let version = before[change.id]?.version ?? 0
                    guard change.events == change.sheet.events.filter({ $0.seq > version }) else {
                        Issue.record("\(context): change of \(change.id) lists other events than it recorded"); return coverage
                    }
                    sheets[change.id] = change.sheet
                }
                guard sheets.count == model.sheets.count else {
                    Issue.record("\(context): \(sheets.count) sessions, model \(model.sheets.count)"); return coverage
                }
                for (n, m) in model.sheets {
                    guard let sheet = sheets[ModelWorld.id(n)] else { Issue.record("\(context): \(n) missing"); return coverage }
                    if let problem = agree(n, sheet, m, sheets) { Issue.record("\(context): \(problem)"); return coverage }
                }
                coverage.checked += 1
                if let code = expected.error { coverage.refusals.insert(code) }
                coverage.widestChange = max(coverage.widestChange, produced.count)
                for n in model.sheets.keys { coverage.deepest = max(coverage.deepest, model.depth(n)) }
            }
        }
        return coverage
    }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func shortFlatSessions(seed: UInt64) async {
        #expect(await Self.run(seed: seed, worlds: 1000, steps: 30, chains: false).checked > 10_000)
    }

    /// Long sessions wrap the 256-event ring many times.
    @Test func longSessions() async {
        #expect(await Self.run(seed: 0xB16, worlds: 12, steps: 1500, chains: false).checked > 5000)
    }

    /// Chains of up to 8 nested sheets, created, acted on, cascaded and deleted at random; the
    /// seeds together reach every refusal a chain adds.
    @Test func chainsOfSheets() async {
        var refusals: Set<String> = []
        for seed in [UInt64(11), 12, 13] {
            let coverage = await Self.run(seed: seed, worlds: 70, steps: 120, chains: true)
            #expect(coverage.checked > 7000)
            #expect(coverage.deepest == SheetChain.maximumDepth)
            #expect(coverage.widestChange >= 4)
            refusals.formUnion(coverage.refusals)
        }
        for code in ["too_deep", "sheet_covered", "parent_unavailable", "threshold_inactive", "cannot_pop", "invalid_field"] {
            #expect(refusals.contains(code), "no step was refused with \(code)")
        }
    }

    @Test func reproducible() {
        var a = SplitMix64(seed: 42), b = SplitMix64(seed: 42)
        #expect((0..<100).map { _ in a.next() } == (0..<100).map { _ in b.next() })
    }
}
