/// Reading a stored sheet: the API's session object (written by the API's renderer, the one
/// writer of sessions) with its retained `events` beside it. Members the state is derived from
/// (`heights`, `dimmed`, ...) are read past; members added after the first release are optional,
/// with the value every sheet had before they existed.
extension Sheet {
    enum CodingKeys: String, CodingKey {
        case configuration = "config"
        case phase, detent, presentation, dismissReason, version, createdAt, updatedAt, events
        case containerHeight, stack, child   // LaterState reads them; named here for its errors
    }

    /// Reads a stored session back and refuses one that breaks an invariant the reducer relies
    /// on, rather than running a state machine from an impossible state.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let configuration = try c.decode(SheetConfiguration.self, forKey: .configuration)
        do {
            try self.init(restoring: configuration,
                          phase: try c.decode(Phase.self, forKey: .phase),
                          detent: try c.decode(Detent.self, forKey: .detent),
                          presentation: try c.decode(Int.self, forKey: .presentation),
                          dismissReason: try c.decodeIfPresent(DismissReason.self, forKey: .dismissReason),
                          createdAt: try c.decode(Timestamp.self, forKey: .createdAt),
                          events: try c.decode([SheetEvent].self, forKey: .events),
                          version: try c.decodeIfPresent(UInt64.self, forKey: .version),
                          later: try LaterState(from: decoder))
        } catch let error as RestoreError {
            let key: CodingKeys = switch error.part.base {
            case .detent: .detent
            case .presentation: .presentation
            case .dismissReason: .dismissReason
            case .events: .events
            case .version: .version
            case .containerHeight: .containerHeight
            case .stack: .stack
            case .child: .child
            }
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: error.reason)
        }
    }

    /// Why a stored session cannot be restored: which part breaks which invariant.
    public struct RestoreError: Error, CustomStringConvertible {
        /// The part at fault; a struct around the package's enum, as `SheetError.Code` is.
        public struct Part: Hashable, Sendable, CustomStringConvertible {
            package enum Base: String, Sendable { case detent, presentation, dismissReason, events, version, containerHeight, stack, child }
            package let base: Base
            public var description: String { base.rawValue }

            public static let detent = Part(base: .detent)
            public static let presentation = Part(base: .presentation)
            public static let dismissReason = Part(base: .dismissReason)
            public static let events = Part(base: .events)
            public static let version = Part(base: .version)
            public static let containerHeight = Part(base: .containerHeight)
            public static let stack = Part(base: .stack)
            public static let child = Part(base: .child)
        }
        public let part: Part
        public let reason: String
        public var description: String { "\(part): \(reason)" }

        init(part: Part.Base, reason: String) {
            self.part = Part(base: part)
            self.reason = reason
        }
    }

    /// A stored session from its parts, without a decoder (start-up reads a million of them),
    /// with the same checks as `init(from:)`. `configuration` may be shared by many sessions.
    /// The members of `later` a file written before them lacks take the values every sheet had
    /// then: no changes, the configured height, the root screen alone, no chain.
    public init(restoring configuration: SheetConfiguration, phase: Phase, detent: Detent, presentation: Int,
                dismissReason: DismissReason?, createdAt: Timestamp, events: [SheetEvent], version: UInt64? = nil,
                later: LaterState = LaterState()) throws(RestoreError) {
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
        let height = later.containerHeight ?? configuration.containerHeight
        guard height.isFinite, SheetConfiguration.containerHeightRange.contains(height) else {
            throw RestoreError(part: .containerHeight, reason: "a container height is 1 to 10000 points")
        }
        let stack = later.stack ?? configuration.storage.rootStack
        guard !stack.isEmpty, stack.count <= NavigationStack.maximumDepth,
              stack.allSatisfy({ NavigationStack.problem(withName: $0) == nil }) else {
            throw RestoreError(part: .stack, reason: "a navigation stack holds 1 to \(NavigationStack.maximumDepth) screen names")
        }
        guard later.child == nil || phase == .presented else {
            throw RestoreError(part: .child, reason: "only a presented sheet can be covered")
        }
        self.init(configuration: configuration, parent: later.parent, now: createdAt)
        self.phase = phase
        self.presentation = presentation
        self.dismissReason = dismissReason
        self.hasChanges = later.hasChanges ?? false
        self.stack = stack
        self.child = later.child
        detentIndex = UInt8(i)
        if height != configuration.containerHeight {
            layout = ContainerLayout(detents: configuration.detents, thresholdIndex: configuration.storage.thresholdIndex,
                                     containerHeight: height)
        }
        replaceLog(with: events)
    }
}
