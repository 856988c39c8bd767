import SheetCore

// An independent reference model of SHEET-SEMANTICS.md (Parts 1 and 2), written from the
// document with plain strings, integers and arrays: no SheetCore logic is reused (SheetCore
// types appear only to build the events it should record, for comparison).

struct ModelConfig {
    var container: Double          // at creation
    var detents: [String]          // the effective set
    var defaultDetent: String
    var threshold: String?
    var policy: String             // allow | intercept | block
    var confirm: Bool              // interceptAction confirm (else notify)
    var factor: Double             // d / (1 − d): 0.998 → 499, 0.99 → 99
    var protectWhen = "always"     // always | hasChanges
    var undimmed: String?
    var root = "root"

    static func height(_ d: String, _ container: Double) -> Double {
        if d == "large" { return container }
        if d == "medium" { return container / 2 }
        if d.hasPrefix("fraction:") { return container * Double(d.dropFirst(9))! }
        return min(Double(d.dropFirst(7))!, container)
    }

    func height(_ d: String) -> Double { Self.height(d, container) }

    /// The detents in order at a height: resolved points, ties by string.
    func ordered(at container: Double) -> [String] {
        detents.sorted { (Self.height($0, container), $0) < (Self.height($1, container), $1) }
    }
}

enum ModelAction {
    case drag(String), gesture(Double, Double), confirm(String), dismiss(String), present
    case changes(Bool), select(String), resize(Double), push(String), pop(Int)
}

/// One session of the model.
struct ModelSheet {
    let config: ModelConfig
    var phase = "presented"
    var detent: String
    var presentation = 1
    var reason: String?
    var version: UInt64 = 0
    var log: [SheetEvent] = []
    var hasChanges = false
    var container: Double
    var stack: [String]
    var parent: Int?
    var child: Int?

    init(config: ModelConfig, parent: Int?) {
        self.config = config
        detent = config.defaultDetent
        container = config.container
        stack = [config.root]
        self.parent = parent
    }

    func height(_ d: String) -> Double { ModelConfig.height(d, container) }

    var thresholdActive: Bool {
        guard let t = config.threshold else { return false }
        return config.detents.allSatisfy { $0 == t || height($0) > height(t) }
    }

    var isProtected: Bool { config.policy != "allow" && (config.protectWhen == "always" || hasChanges) }

    var dimmed: Bool {
        if phase == "dismissed" { return false }
        guard let u = config.undimmed else { return true }
        return !(height(detent) <= height(u))
    }
}

/// Every session, and the order in which this step touched them.
struct ModelWorld {
    var sheets: [Int: ModelSheet] = [:]
    var touched: [Int] = []
    var now = Timestamp(millisecondsSince1970: 0)

    static func id(_ n: Int) -> SessionID { SessionID(high: UInt64(n), low: UInt64(n) &* 0x9E37_79B9) }

    mutating func record(_ n: Int, _ kind: SheetEvent.Kind, _ gesture: GestureResolution? = nil) {
        sheets[n]!.version += 1
        sheets[n]!.log.append(SheetEvent(seq: sheets[n]!.version, at: now, kind: kind, gesture: gesture))
        if sheets[n]!.log.count > 256 { sheets[n]!.log.removeFirst() }
        if !touched.contains(n) { touched.append(n) }
    }

    // MARK: Creation

    mutating func createRoot(_ n: Int, _ config: ModelConfig) {
        sheets[n] = ModelSheet(config: config, parent: nil)
        record(n, .presented(detent: detent(config.defaultDetent), presentation: 1))
    }

    func depth(_ n: Int) -> Int {
        var d = 1
        var p = sheets[n]!.parent
        while let q = p { d += 1; p = sheets[q]!.parent }
        return d
    }

    mutating func createChild(_ n: Int, over p: Int, _ config: ModelConfig) -> String? {
        guard let parent = sheets[p] else { return "invalid_field" }
        if parent.phase == "confirming" { return "confirmation_pending" }
        if parent.phase == "dismissed" { return "sheet_dismissed" }
        if parent.child != nil { return "sheet_covered" }
        if depth(p) >= 8 { return "too_deep" }
        sheets[n] = ModelSheet(config: config, parent: p)
        record(n, .presented(detent: detent(config.defaultDetent), presentation: 1))
        sheets[p]!.child = n
        record(p, .covered(child: Self.id(n)))
        return nil
    }

    mutating func delete(_ n: Int) {
        if let p = sheets[n]!.parent, sheets[p]?.child == n {
            sheets[p]!.child = nil
            record(p, .uncovered(child: Self.id(n), reason: .deleted))
        }
        var doomed = [n]
        var i = 0
        while i < doomed.count {
            doomed += sheets.filter { $0.value.parent == doomed[i] }.map(\.key)
            i += 1
        }
        for d in doomed { sheets[d] = nil }
    }

    // MARK: Actions

    /// nil on success, or the error code the semantics require; the gesture's resolution.
    mutating func apply(_ action: ModelAction, to n: Int) -> (error: String?, gesture: GestureResolution?) {
        let s = sheets[n]!
        let c = s.config
        func presentedOnly() -> String? {
            switch s.phase {
            case "confirming": "confirmation_pending"
            case "dismissed": "sheet_dismissed"
            default: nil
            }
        }
        func dragConflict() -> String? {
            if s.phase == "presented" && s.child != nil { return "sheet_covered" }
            return presentedOnly()
        }
        switch action {
        case .drag(let to):
            if to != "closed" && !c.detents.contains(to) { return ("unknown_detent", nil) }
            if let e = dragConflict() { return (e, nil) }
            if to == c.threshold && !s.thresholdActive { return ("threshold_inactive", nil) }
            land(n, to, gesture: nil)
            return (nil, nil)
        case .gesture(let t, let v):
            if let e = dragConflict() { return (e, nil) }
            let h0 = s.height(s.detent)
            let r = h0 - t
            let p = r - v * c.factor / 1000
            var best = "closed", bestHeight = 0.0, bestDistance = abs(p)
            for d in c.ordered(at: s.container) where d != c.threshold || s.thresholdActive {
                let distance = abs(p - s.height(d))
                if distance <= bestDistance { (best, bestHeight, bestDistance) = (d, s.height(d), distance) }
            }
            if bestHeight == h0 { best = s.detent }   // the same place on screen as now: stay
            let g = GestureResolution(releasedHeight: micro(r), projectedHeight: micro(p), target: SheetCoreTests.target(best))
            land(n, best, gesture: g)
            return (nil, g)
        case .confirm(let answer):
            guard s.phase == "confirming" else { return ("no_pending_confirmation", nil) }
            if answer == "cancel" {
                sheets[n]!.phase = "presented"
                record(n, .confirmationCancelled(detent: detent(s.detent)))
            } else {
                dismiss(n, answer == "discard" ? "discarded" : "saved", nil)
            }
            return (nil, nil)
        case .dismiss(let why):
            guard s.phase != "dismissed" else { return ("sheet_dismissed", nil) }
            // Everything above goes first, top first.
            var above: [Int] = []
            var next = s.child
            while let a = next { above.append(a); next = sheets[a]!.child }
            for a in above.reversed() { dismiss(a, "parentDismissed", nil) }
            dismiss(n, why, nil)
            return (nil, nil)
        case .present:
            guard s.phase == "dismissed" else { return ("sheet_presented", nil) }
            if let p = s.parent, sheets[p]!.phase != "presented" || sheets[p]!.child != nil {
                return ("parent_unavailable", nil)
            }
            sheets[n]!.phase = "presented"
            sheets[n]!.reason = nil
            sheets[n]!.detent = c.defaultDetent
            sheets[n]!.presentation += 1
            sheets[n]!.hasChanges = false
            sheets[n]!.stack = [c.root]
            record(n, .presented(detent: detent(c.defaultDetent), presentation: s.presentation + 1))
            if let p = s.parent {
                sheets[p]!.child = n
                record(p, .covered(child: Self.id(n)))
            }
            return (nil, nil)
        case .changes(let value):
            if s.phase == "dismissed" { return ("sheet_dismissed", nil) }
            if value != s.hasChanges {
                sheets[n]!.hasChanges = value
                record(n, .changesMarked(hasChanges: value))
            }
            return (nil, nil)
        case .select(let d):
            if !c.detents.contains(d) { return ("unknown_detent", nil) }
            if d == c.threshold { return ("invalid_field", nil) }
            if let e = presentedOnly() { return (e, nil) }
            if d != s.detent {
                sheets[n]!.detent = d
                record(n, .detentChanged(from: detent(s.detent), to: detent(d), by: .app))
            }
            return (nil, nil)
        case .resize(let h):
            guard h.isFinite, h >= 1, h <= 10_000 else { return ("invalid_field", nil) }
            if h != s.container {
                sheets[n]!.container = h
                record(n, .resized(from: s.container, to: h))
            }
            return (nil, nil)
        case .push(let name):
            let allowed = name.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || ".-_".unicodeScalars.contains($0)
            }
            guard allowed, (1...64).contains(name.utf8.count) else { return ("invalid_field", nil) }
            if let e = presentedOnly() { return (e, nil) }
            if s.stack.count >= 32 { return ("stack_full", nil) }
            sheets[n]!.stack.append(name)
            record(n, .pushed(screen: name, depth: s.stack.count + 1))
            return (nil, nil)
        case .pop(let k):
            guard k >= 1 else { return ("invalid_field", nil) }
            if let e = presentedOnly() { return (e, nil) }
            if k > s.stack.count - 1 { return ("cannot_pop", nil) }
            sheets[n]!.stack.removeLast(k)
            record(n, .popped(screens: Array(s.stack.suffix(k).reversed()), depth: s.stack.count - k))
            return (nil, nil)
        }
    }

    mutating func land(_ n: Int, _ to: String, gesture: GestureResolution?) {
        let s = sheets[n]!
        if to == s.detent { return }
        let protected = s.isProtected
        if to == s.config.threshold {
            if protected { intercept(n, to, gesture) } else { dismiss(n, "swipe", gesture) }
        } else if to == "closed" {
            switch s.config.policy {
            case "intercept" where protected: intercept(n, to, gesture)
            case "block" where protected: record(n, .dismissBlocked(attempted: .closed), gesture)
            default: dismiss(n, "swipe", gesture)
            }
        } else {
            sheets[n]!.detent = to
            record(n, .detentChanged(from: detent(s.detent), to: detent(to), by: .user), gesture)
        }
    }

    mutating func intercept(_ n: Int, _ attempted: String, _ gesture: GestureResolution?) {
        if sheets[n]!.config.confirm { sheets[n]!.phase = "confirming" }
        record(n, .intercepted(attempted: target(attempted), restoredTo: detent(sheets[n]!.detent)), gesture)
    }

    /// Dismisses one sheet (whatever is above it already gone) and uncovers the one below.
    mutating func dismiss(_ n: Int, _ why: String, _ gesture: GestureResolution?) {
        if let c = sheets[n]!.child {   // only a sheet the lookup lacks; never in the model
            sheets[n]!.child = nil
            record(n, .uncovered(child: Self.id(c), reason: UncoverReason(rawValue: "parentDismissed")!))
        }
        sheets[n]!.phase = "dismissed"
        sheets[n]!.reason = why
        if why == "discarded" || why == "saved" { sheets[n]!.hasChanges = false }
        record(n, .dismissed(reason: DismissReason(rawValue: why)!, screen: sheets[n]!.stack.last!), gesture)
        if let p = sheets[n]!.parent, sheets[p]!.child == n {
            sheets[p]!.child = nil
            record(p, .uncovered(child: Self.id(n), reason: UncoverReason(rawValue: why)!))
        }
    }

    func micro(_ x: Double) -> Double { (x * 1_000_000).rounded() / 1_000_000 }
}
