/// One session a chain step changed: its new state and the events it recorded, in order.
public struct ChainChange: Hashable, Sendable {
    public let id: SessionID
    public var sheet: Sheet
    public var events: [SheetEvent]

    public init(id: SessionID, sheet: Sheet, events: [SheetEvent]) {
        self.id = id
        self.sheet = sheet
        self.events = events
    }
}

/// What one action did to a chain of sheets.
public struct ChainOutcome: Hashable, Sendable {
    /// The answer for the session the action was sent to: its own events only.
    public var outcome: SheetOutcome
    /// Every session that changed, the target included, each once, in the order their first
    /// event was recorded. A store commits all of them as one change or none.
    public var changes: [ChainChange]
}

/// Sheets over sheets, as UIKit presents them: a sheet presented from a sheet covers it, and
/// dismissing the lower one takes down everything above it first, top-down.
///
/// Pure functions over a chain: the caller gives the sheet the action is for and a way to look
/// up the others by id (its own storage), and gets back every new state and event at once, so
/// it can make the whole step visible, durable, and streamed as one change.
public enum SheetChain {
    /// Sessions in one chain at most, the root included.
    public static let maximumDepth = 8

    /// Creates `id` presented over `parent`, which records `covered`. The parent must exist
    /// (`invalid_field`, field `parent`), be presented (`confirmation_pending`,
    /// `sheet_dismissed`), not be covered (`sheet_covered`), and have fewer than
    /// `maximumDepth` sheets in its chain counting itself (`too_deep`).
    public static func present(_ id: SessionID, configuration: SheetConfiguration, over parentID: SessionID,
                               in sheets: (SessionID) -> Sheet?, now: Timestamp) throws(SheetError) -> ChainOutcome {
        guard var parent = sheets(parentID) else {
            throw SheetError(code: .invalidField, message: "parent \(parentID) is no session of this server", field: "parent")
        }
        switch parent.phase {
        case .presented: break
        case .confirming:
            throw SheetError(code: .confirmationPending, message: "the parent is waiting for a confirmation; a sheet cannot be presented over it now")
        case .dismissed:
            throw SheetError(code: .sheetDismissed, message: "the parent is dismissed; a sheet cannot be presented over it")
        }
        if let other = parent.child {
            throw SheetError(code: .sheetCovered, message: "the parent is already covered by \(other)")
        }
        guard depth(of: parent, in: sheets) < maximumDepth else {
            throw SheetError(code: .tooDeep, message: "a chain holds at most \(maximumDepth) sheets")
        }
        let child = Sheet(configuration: configuration, parent: parentID, now: now)
        let covered = parent.cover(with: id, now: now)
        return ChainOutcome(outcome: SheetOutcome(events: Array(child.events)), changes: [
            ChainChange(id: id, sheet: child, events: Array(child.events)),
            ChainChange(id: parentID, sheet: parent, events: covered),
        ])
    }

    /// Applies `action` to `sheet` (the session `id`) and whatever it does to the rest of its chain:
    /// - `dismiss` of a covered sheet first dismisses every sheet above it, top first, each with
    ///   `parentDismissed` and each uncovering the one below;
    /// - any dismissal uncovers the parent, with the dismissal's reason;
    /// - `present` needs the parent presented and uncovered (`parent_unavailable`), and covers it.
    public static func apply(_ action: SheetAction, to id: SessionID, _ sheet: Sheet,
                             in sheets: (SessionID) -> Sheet?, now: Timestamp) throws(SheetError) -> ChainOutcome {
        var target = sheet
        var changes = Changes()
        var outcome: SheetOutcome
        switch action {
        case .dismiss(let reason) where target.child != nil && target.phase != .dismissed:
            // The sheets above, bottom first. A chain is at most `maximumDepth` long; the bound
            // also keeps a damaged store's cycle from looping.
            var above: [(id: SessionID, sheet: Sheet)] = []
            var next = target.child
            while let aboveID = next, above.count < maximumDepth, let aboveSheet = sheets(aboveID) {
                above.append((aboveID, aboveSheet))
                next = aboveSheet.child
            }
            for k in above.indices.reversed() {
                // Only the top one can still be covered here: by a sheet the lookup lacks.
                changes.add(above[k].id, above[k].sheet.uncover(.parentDismissed, now: now), above[k].sheet)
                changes.add(above[k].id, above[k].sheet.dismissWithParent(now: now), above[k].sheet)
                if k > 0 {
                    changes.add(above[k - 1].id, above[k - 1].sheet.uncover(.parentDismissed, now: now), above[k - 1].sheet)
                }
            }
            changes.add(id, target.uncover(.parentDismissed, now: now), target)
            changes.add(id, try target.apply(.dismiss(reason), now: now).events, target)
            outcome = SheetOutcome(events: changes.events(of: id))
        case .present where target.phase == .dismissed && target.parent != nil:
            let parentID = target.parent!
            guard let parent = sheets(parentID), parent.phase == .presented, parent.child == nil else {
                throw SheetError(code: .parentUnavailable,
                                 message: "the sheet below (\(parentID)) must be presented and uncovered before this one is presented over it again")
            }
            outcome = try target.apply(action, now: now)
            changes.add(id, outcome.events, target)
            var covered = parent
            changes.add(parentID, covered.cover(with: id, now: now), covered)
            return ChainOutcome(outcome: outcome, changes: changes.list)
        default:
            outcome = try target.apply(action, now: now)
            changes.add(id, outcome.events, target)
        }
        if target.phase == .dismissed, sheet.phase != .dismissed, let parentID = target.parent,
           var parent = sheets(parentID), parent.child == id {
            changes.add(parentID, parent.uncover(UncoverReason(target.dismissReason ?? .programmatic), now: now), parent)
        }
        return ChainOutcome(outcome: outcome, changes: changes.list)
    }

    /// What deleting `id` does to the sheet below: if `sheet` covered its parent, the parent
    /// records `uncovered {reason: deleted}`. The caller removes the deleted sheet and all its
    /// descendants, presented or dismissed.
    public static func delete(_ id: SessionID, _ sheet: Sheet, in sheets: (SessionID) -> Sheet?,
                              now: Timestamp) -> [ChainChange] {
        guard let parentID = sheet.parent, var parent = sheets(parentID), parent.child == id else { return [] }
        let events = parent.uncover(.deleted, now: now)
        return [ChainChange(id: parentID, sheet: parent, events: events)]
    }

    /// `id` and every session presented over it, directly or not, presented or dismissed, in the
    /// order a store removes them: each session after all of its descendants, `id` last. A
    /// session's own record names only the child covering it now, so `children` gives every
    /// session created over a session (the store's index of `parent` links).
    public static func removalOrder(of id: SessionID, children: (SessionID) -> [SessionID]) -> [SessionID] {
        var order: [SessionID] = []
        var seen: Set<SessionID> = [id]
        // Iterative post-order: a damaged index with a cycle ends at a session already seen.
        var stack: [(id: SessionID, expanded: Bool)] = [(id, false)]
        while let (next, expanded) = stack.popLast() {
            if expanded {
                order.append(next)
                continue
            }
            stack.append((next, true))
            for child in children(next) where seen.insert(child).inserted { stack.append((child, false)) }
        }
        return order
    }

    /// The session at the bottom of `id`'s chain: the one its parents lead to that has no parent
    /// (or whose parent is missing). A chain is the root and every session over it; idle expiry
    /// removes a chain as one, when none of its sessions has had activity for the time to live.
    public static func root(of id: SessionID, in sheets: (SessionID) -> Sheet?) -> SessionID {
        var root = id
        var steps = 0
        while steps < maximumDepth, let parent = sheets(root)?.parent, sheets(parent) != nil {
            root = parent
            steps += 1
        }
        return root
    }

    /// Sheets from the root of `sheet`'s chain up to `sheet`, counting it.
    public static func depth(of sheet: Sheet, in sheets: (SessionID) -> Sheet?) -> Int {
        var depth = 1
        var next = sheet.parent
        while let id = next, depth <= maximumDepth, let below = sheets(id) {
            depth += 1
            next = below.parent
        }
        return depth
    }

    /// Changes collected in order, one entry per session, the latest state kept.
    private struct Changes {
        var list: [ChainChange] = []

        mutating func add(_ id: SessionID, _ events: [SheetEvent], _ sheet: Sheet) {
            if let i = list.firstIndex(where: { $0.id == id }) {
                list[i].sheet = sheet
                list[i].events += events
            } else if !events.isEmpty {
                list.append(ChainChange(id: id, sheet: sheet, events: events))
            }
        }

        func events(of id: SessionID) -> [SheetEvent] { list.first(where: { $0.id == id })?.events ?? [] }
    }
}
