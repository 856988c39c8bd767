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
/// and `version`/`updatedAt` come from the newest event (its seq cached beside the event ring)
/// instead of being kept as fields of their own — so a store can hold many sessions and copy one
/// cheaply.
public struct Sheet: Hashable, Sendable, Codable {
    public static let retainedEvents = 256

    public let configuration: SheetConfiguration
    public let createdAt: Timestamp
    public private(set) var presentation: Int
    private var log: EventLog
    public private(set) var phase: Phase
    public private(set) var dismissReason: DismissReason?
    private var detentIndex: UInt8

    /// Where the sheet rests (or rested, once dismissed). Never the threshold.
    public var detent: Detent { configuration.storage.detents[Int(detentIndex)] }
    /// The `seq` of the latest event: what `If-Match`-style preconditions compare against.
    public var version: UInt64 { log.newestSeq }
    /// When the latest event was recorded.
    public var updatedAt: Timestamp { log.newest?.at ?? createdAt }
    /// Newest `retainedEvents` events, oldest first.
    public var events: EventLog { log }

    /// Records `presented {detent: default, presentation: 1}` as seq 1 at `now`.
    public init(configuration: SheetConfiguration, now: Timestamp) {
        self.configuration = configuration
        self.createdAt = now
        self.presentation = 1
        self.log = EventLog()
        self.phase = .presented
        self.dismissReason = nil
        self.detentIndex = UInt8(configuration.storage.defaultIndex)
        log.append(SheetEvent(seq: 1, at: now,
                              kind: .presented(detent: configuration.defaultDetent, presentation: 1)))
    }

    /// Applies an action. On error nothing changes. Events get seq version+1…, `at: now`.
    ///
    /// Checks run in the API's order: the body (an unknown detent, a 400) before the phase (409).
    public mutating func apply(_ action: SheetAction, now: Timestamp) throws(SheetError) -> SheetOutcome {
        switch action {
        case .drag(let target):
            let landing: Landing
            switch target {
            case .closed:
                landing = .closed
            case .detent(let d):
                guard let i = configuration.index(of: d) else { throw unknownDetent(d) }
                landing = .detent(i)
            }
            try requireDragAllowed()
            return drag(to: landing, attempted: target, gesture: nil, now: now)

        case .gesture(let gesture):
            try requireDragAllowed()
            let (resolution, landing) = configuration.settle(gesture, from: Int(detentIndex))
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
            return dismiss(reason.dismissReason, now: now)

        case .present:
            guard phase == .dismissed else {
                throw SheetError(code: .sheetPresented, message: "the sheet is already presented (\(phase.rawValue))")
            }
            phase = .presented
            dismissReason = nil
            detentIndex = UInt8(configuration.storage.defaultIndex)
            presentation += 1
            return record(.presented(detent: detent, presentation: presentation), now: now)
        }
    }

    /// What is wrong with the action's own values whatever the sheet's phase and version (a drag
    /// to a detent this sheet was not configured with), or nil. `apply` throws the same error; a
    /// store checks it before a version precondition, which it outranks.
    public func requestError(in action: SheetAction) -> SheetError? {
        switch action {
        case .drag(.detent(let d)) where configuration.index(of: d) == nil: unknownDetent(d)
        case .drag, .gesture, .confirm, .dismiss, .present: nil
        }
    }

    private func unknownDetent(_ d: Detent) -> SheetError {
        SheetError(code: .unknownDetent,
                   message: "\(d) is not one of this sheet's detents (\(configuration.detents.map(\.description).joined(separator: ", ")))",
                   field: "to")
    }

    /// Events with seq > after, or `.expired` when some of them were already dropped.
    public func events(after: UInt64) -> EventsAfter {
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

    /// Pure target choice for a gesture from the current detent (issue 5's rule).
    public func resolve(_ gesture: DragGesture) -> GestureResolution {
        configuration.settle(gesture, from: Int(detentIndex)).0
    }

    // MARK: Transitions

    private func requireDragAllowed() throws(SheetError) {
        switch phase {
        case .presented: return
        case .confirming:
            throw SheetError(code: .confirmationPending,
                             message: "a confirmation is pending: answer it with confirm before dragging")
        case .dismissed:
            throw SheetError(code: .sheetDismissed, message: "the sheet is dismissed: present it before dragging")
        }
    }

    /// The drag table of SHEET-SEMANTICS.md, once the target is known and the phase allows it.
    private mutating func drag(to landing: Landing, attempted: DragTarget, gesture: GestureResolution?,
                               now: Timestamp) -> SheetOutcome {
        let storage = configuration.storage
        switch landing {
        case .detent(let i) where i == Int(detentIndex):
            return SheetOutcome(events: [])
        case .detent(let i) where i == storage.thresholdIndex:
            return intercept(attempted, gesture: gesture, now: now)
        case .detent(let i):
            let from = detent
            detentIndex = UInt8(i)
            return record(.detentChanged(from: from, to: detent), gesture: gesture, now: now)
        case .closed:
            switch storage.dismissPolicy {
            case .allow: return dismiss(.swipe, gesture: gesture, now: now)
            case .intercept: return intercept(attempted, gesture: gesture, now: now)
            case .block: return record(.dismissBlocked(attempted: .closed), gesture: gesture, now: now)
            }
        }
    }

    /// The sheet snaps back to where it was (seed 000); with `confirm` the app now asks.
    private mutating func intercept(_ attempted: DragTarget, gesture: GestureResolution?, now: Timestamp) -> SheetOutcome {
        if configuration.storage.interceptAction == .confirm { phase = .confirming }
        return record(.intercepted(attempted: attempted, restoredTo: detent), gesture: gesture, now: now)
    }

    private mutating func dismiss(_ reason: DismissReason, gesture: GestureResolution? = nil, now: Timestamp) -> SheetOutcome {
        phase = .dismissed
        dismissReason = reason
        return record(.dismissed(reason: reason), gesture: gesture, now: now)
    }

    private mutating func record(_ kind: SheetEvent.Kind, gesture: GestureResolution? = nil, now: Timestamp) -> SheetOutcome {
        let event = SheetEvent(seq: version + 1, at: now, kind: kind, gesture: gesture)
        log.append(event)
        return SheetOutcome(events: [event])
    }

    // MARK: Codable (the store's shape, not the API's)

    private enum CodingKeys: String, CodingKey {
        case configuration, phase, detent, presentation, dismissReason, version, createdAt, updatedAt, events
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(configuration, forKey: .configuration)
        try c.encode(phase, forKey: .phase)
        try c.encode(detent, forKey: .detent)
        try c.encode(presentation, forKey: .presentation)
        try c.encodeIfPresent(dismissReason, forKey: .dismissReason)
        try c.encode(version, forKey: .version)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(Array(log), forKey: .events)
    }

    /// Reads a stored session back and refuses one that breaks an invariant the reducer relies
    /// on, rather than running a state machine from an impossible state.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(restoring: try c.decode(SheetConfiguration.self, forKey: .configuration),
                          phase: try c.decode(Phase.self, forKey: .phase),
                          detent: try c.decode(Detent.self, forKey: .detent),
                          presentation: try c.decode(Int.self, forKey: .presentation),
                          dismissReason: try c.decodeIfPresent(DismissReason.self, forKey: .dismissReason),
                          createdAt: try c.decode(Timestamp.self, forKey: .createdAt),
                          events: try c.decode([SheetEvent].self, forKey: .events),
                          version: try c.decodeIfPresent(UInt64.self, forKey: .version))
        } catch let error as RestoreError {
            let key: CodingKeys = switch error.part {
            case .detent: .detent
            case .presentation: .presentation
            case .dismissReason: .dismissReason
            case .events: .events
            case .version: .version
            }
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: error.reason)
        }
    }

    /// Why a stored session cannot be restored: which part breaks which invariant.
    public struct RestoreError: Error, CustomStringConvertible {
        public enum Part: String, Sendable { case detent, presentation, dismissReason, events, version }
        public let part: Part
        public let reason: String
        public var description: String { "\(part.rawValue): \(reason)" }
    }

    /// A stored session from its parts, without a decoder (start-up reads a million of them),
    /// with the same checks as `init(from:)`. `configuration` may be shared by many sessions.
    public init(restoring configuration: SheetConfiguration, phase: Phase, detent: Detent, presentation: Int,
                dismissReason: DismissReason?, createdAt: Timestamp, events: [SheetEvent], version: UInt64? = nil) throws(RestoreError) {
        guard let i = configuration.index(of: detent), i != configuration.storage.thresholdIndex else {
            throw RestoreError(part: .detent, reason: "\(detent) is not a resting detent of this configuration")
        }
        guard presentation >= 1 else { throw RestoreError(part: .presentation, reason: "presentation counts from 1") }
        guard (phase == .dismissed) == (dismissReason != nil) else {
            throw RestoreError(part: .dismissReason, reason: "a dismissed sheet has a reason and only a dismissed one does")
        }
        guard !events.isEmpty, events.count <= Self.retainedEvents, events[0].seq >= 1 else {
            throw RestoreError(part: .events, reason: "expected 1 to \(Self.retainedEvents) events")
        }
        for (a, b) in zip(events, events.dropFirst()) where b.seq != a.seq + 1 {
            throw RestoreError(part: .events, reason: "event seq must count up by one: \(a.seq) then \(b.seq)")
        }
        if let version, version != events[events.count - 1].seq {
            throw RestoreError(part: .version, reason: "version \(version) is not the seq of the latest event")
        }
        self.configuration = configuration
        self.phase = phase
        self.presentation = presentation
        self.dismissReason = dismissReason
        self.createdAt = createdAt
        detentIndex = UInt8(i)
        log = EventLog()
        for event in events { log.append(event) }
    }
}
