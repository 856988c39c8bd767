/// What one action did.
public struct SheetOutcome: Hashable, Sendable {
    /// Possibly empty (a drag to the current detent changes nothing).
    public var events: [SheetEvent]
    /// Non-nil for `.gesture` actions, even when the gesture produced no event.
    public var gesture: GestureResolution?

    public init(events: [SheetEvent], gesture: GestureResolution? = nil) {
        self.events = events
        self.gesture = gesture
    }
}

/// One session's sheet: state plus a reducer, `apply(action) → events`. No I/O and no clock.
///
/// Stored compactly — the configuration is one shared reference, the detent an index into it,
/// the container's layout a shared table, and `version`/`updatedAt` come from the newest event
/// (its seq cached beside the event ring) instead of being kept as fields of their own — so a
/// store can hold many sessions and copy one cheaply.
///
/// A sheet in a chain (`parent` or `child` set) is changed through `SheetChain`, which applies
/// what an action does to the sheets above and below it in the same step.
public struct Sheet: Hashable, Sendable, Decodable {
    public static let retainedEvents = 256

    public let configuration: SheetConfiguration
    public let createdAt: Timestamp
    public internal(set) var presentation: Int
    /// The events, or none while the only one is the `presented` every sheet starts with, which
    /// `log` then derives: a sheet that was never changed (most of what a store holds) carries
    /// no event buffer. Empty exactly when the log is that one event, so equality still compares logs.
    private var recorded: EventLog
    public internal(set) var phase: Phase
    public internal(set) var dismissReason: DismissReason?
    var detentIndex: UInt8
    /// Whether the app reported something to lose (`changes`).
    public internal(set) var hasChanges: Bool
    var layout: ContainerLayout
    /// The navigation stack, root first; never empty.
    public internal(set) var stack: [String]
    /// nil for a sheet in no chain, which is nearly every sheet: one word instead of two
    /// optional ids in every session a store holds.
    var links: ChainLinks?

    /// The sheet this one is presented over, if any. Fixed at creation.
    public var parent: SessionID? { links?.parent }
    /// The sheet presented over this one, while there is one: this sheet is then covered.
    public internal(set) var child: SessionID? {
        get { links?.child }
        set { links = ChainLinks(parent: parent, child: newValue) }
    }

    /// Where the sheet rests (or rested, once dismissed). Never the threshold.
    public var detent: Detent { configuration.storage.detents[Int(detentIndex)] }
    /// The `seq` of the latest event: what `If-Match`-style preconditions compare against.
    public var version: UInt64 { recorded.isEmpty ? 1 : recorded.newestSeq }
    /// When the latest event was recorded.
    public var updatedAt: Timestamp { recorded.newest?.at ?? createdAt }
    /// Newest `retainedEvents` events, oldest first.
    public var events: EventLog { log }
    /// The height the detents resolve against now (`configuration` keeps the one it was created with).
    public var containerHeight: Double { layout.containerHeight }
    /// Each detent of the effective set with its points at the current height, in detent order.
    public var heights: [(detent: Detent, points: Double)] {
        layout.order.map { (configuration.storage.detents[$0], layout.heights[$0]) }
    }
    /// Whether the threshold can intercept at the current height (false when there is none).
    public var thresholdActive: Bool { layout.thresholdActive }
    /// Presented over another sheet, or covered by one: changed through `SheetChain`.
    public var isInChain: Bool { links != nil }
    /// Another sheet is presented over this one.
    public var isCovered: Bool { child != nil }
    /// Whether a swipe or a drag to the threshold is intercepted or blocked rather than let through.
    public var isProtected: Bool {
        configuration.dismissPolicy != .allow && (configuration.protectWhen == .always || hasChanges)
    }
    /// Whether what is behind the sheet is dimmed: while presented or confirming, unless the
    /// detent resolves at or below `largestUndimmedDetent` at the current height.
    public var dimmed: Bool {
        guard phase != .dismissed else { return false }
        guard let undimmed = configuration.storage.undimmedIndex else { return true }
        return layout.heights[Int(detentIndex)] > layout.heights[undimmed]
    }
    /// Whether what is behind the sheet takes touches: exactly when it is not dimmed (and always
    /// once the sheet is dismissed).
    public var backgroundInteractive: Bool { !dimmed }

    /// Records `presented {detent: default, presentation: 1}` as seq 1 at `now`. A sheet
    /// presented over another is made by `SheetChain.present(_:over:)`, which also covers the parent.
    public init(configuration: SheetConfiguration, now: Timestamp) {
        self.init(configuration: configuration, parent: nil, now: now)
    }

    init(configuration: SheetConfiguration, parent: SessionID?, now: Timestamp) {
        self.configuration = configuration
        self.createdAt = now
        self.presentation = 1
        self.recorded = EventLog()
        self.phase = .presented
        self.dismissReason = nil
        self.detentIndex = UInt8(configuration.storage.defaultIndex)
        self.hasChanges = false
        self.layout = configuration.storage.layout
        self.stack = configuration.storage.rootStack
        self.links = ChainLinks(parent: parent, child: nil)
    }

    /// Seq 1, `presented {detent: default, presentation: 1}` at creation: every sheet's first event.
    private var firstEvent: SheetEvent {
        SheetEvent(seq: 1, at: createdAt, kind: .presented(detent: configuration.defaultDetent, presentation: 1))
    }

    /// The retained events, the first one derived while it is the only one.
    var log: EventLog {
        if !recorded.isEmpty { return recorded }
        var log = EventLog()
        log.append(firstEvent)
        return log
    }

    /// Records `event` after the newest one.
    mutating func appendToLog(_ event: SheetEvent) {
        if recorded.isEmpty { recorded.append(firstEvent) }
        recorded.append(event)
    }

    /// Replaces the log with `events` (seq order, at least one), keeping none when they are just
    /// the first event.
    mutating func replaceLog(with events: some Collection<SheetEvent>) {
        recorded = EventLog()
        if events.count == 1, events.first == firstEvent { return }
        for event in events { recorded.append(event) }
    }

    /// Applies an action to this sheet alone. On error nothing changes. Events get seq
    /// version+1…, `at: now`.
    ///
    /// Checks run in the API's order: the body (400) before the phase (409), and among phase
    /// conflicts the order of the conflict table. Dismissing a covered sheet takes the sheets
    /// above it down too, so it is refused here (`sheet_covered`) and done by `SheetChain`.
    public mutating func apply(_ action: SheetAction, now: Timestamp) throws(SheetError) -> SheetOutcome {
        switch action {
        case .drag(let target):
            let landing = try landing(of: target)
            try requireDragAllowed()
            if case .detent(let i) = landing, i == configuration.storage.thresholdIndex, !layout.thresholdActive {
                throw SheetError(code: .thresholdInactive,
                                 message: "the threshold \(target) does not resolve lower than every other detent at the current container height \(DecimalText.canonical(containerHeight)), so it cannot be dragged to")
            }
            return drag(to: landing, attempted: target, gesture: nil, now: now)

        case .gesture(let gesture):
            try requireDragAllowed()
            let (resolution, landing) = configuration.settle(gesture, from: Int(detentIndex), in: layout)
            var outcome = drag(to: landing, attempted: resolution.target, gesture: resolution, now: now)
            outcome.gesture = resolution
            return outcome

        case .confirm(let answer):
            guard phase == .confirming else {
                throw SheetError(code: .noPendingConfirmation,
                                 message: "there is no pending confirmation to answer: the sheet is \(phase.rawValue)")
            }
            switch answer {
            case .discard: return dismiss(.discarded, now: now)
            case .save: return dismiss(.saved, now: now)
            case .cancel:
                phase = .presented
                return record(.confirmationCancelled(detent: detent), now: now)
            }

        case .dismiss(let reason):
            guard phase != .dismissed else {
                throw SheetError(code: .sheetDismissed, message: "the sheet is already dismissed")
            }
            guard child == nil else {
                throw SheetError(code: .sheetCovered, message: "a covered sheet is dismissed together with the sheets above it")
            }
            return dismiss(reason.dismissReason, now: now)

        case .present:
            guard phase == .dismissed else {
                throw SheetError(code: .sheetPresented, message: "the sheet is already presented (\(phase.rawValue))")
            }
            phase = .presented
            dismissReason = nil
            detentIndex = UInt8(configuration.storage.defaultIndex)
            presentation += 1
            hasChanges = false
            stack = configuration.storage.rootStack
            return record(.presented(detent: detent, presentation: presentation), now: now)

        case .changes(let value):
            guard phase != .dismissed else {
                throw SheetError(code: .sheetDismissed, message: "the sheet is dismissed: there is nothing left to lose")
            }
            guard value != hasChanges else { return SheetOutcome(events: []) }
            hasChanges = value
            return record(.changesMarked(hasChanges: value), now: now)

        case .select(let target):
            return try select(target, now: now)

        case .resize(let height):
            return try resize(to: height, now: now)

        case .navigate(let step):
            return try navigate(step, now: now)
        }
    }

    /// Events with seq > after, or `.expired` when some of them were already dropped.
    public func events(after: UInt64) -> EventsAfter {
        if after >= version { return .events([]) }
        let log = self.log
        guard let oldest = log.first?.seq, oldest >= 1 else { return .events([]) }
        if after < oldest - 1 { return .expired }
        let skip = after - (oldest - 1)   // no overflow even for after == .max
        if skip >= UInt64(log.count) { return .events([]) }
        return .events(Array(log[Int(skip)...]))
    }

    public enum EventsAfter: Hashable, Sendable {
        case events([SheetEvent])
        case expired
    }

    /// The same sheet remembering only its newest `count` events (at least one): what a store
    /// that keeps the events apart from the state writes, so a change does not carry the log.
    public func keepingNewestEvents(_ count: Int) -> Sheet {
        var copy = self
        copy.replaceLog(with: log.suffix(max(1, count)))
        return copy
    }

    /// Pure target choice for a gesture from the current detent at the current height.
    public func resolve(_ gesture: DragGesture) -> GestureResolution {
        configuration.settle(gesture, from: Int(detentIndex), in: layout).0
    }
}

/// A sheet's place in a chain, shared and immutable (`Sendable` by construction); replaced,
/// never changed, when the sheet is covered or uncovered.
final class ChainLinks: Hashable, Sendable {
    let parent: SessionID?
    let child: SessionID?

    /// nil when there is neither: a sheet in no chain carries no box.
    init?(parent: SessionID?, child: SessionID?) {
        if parent == nil && child == nil { return nil }
        self.parent = parent
        self.child = child
    }

    static func == (lhs: ChainLinks, rhs: ChainLinks) -> Bool { lhs.parent == rhs.parent && lhs.child == rhs.child }

    func hash(into hasher: inout Hasher) {
        hasher.combine(parent)
        hasher.combine(child)
    }
}
