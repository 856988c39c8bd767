/// One recorded change. The log of these is what lets a presenter that listens late still see
/// everything that happened: no event is lost to a listener that attached after it.
public struct SheetEvent: Hashable, Sendable, Decodable {
    /// The kinds of event without their values; the raw value is the JSON `type`. Everything that
    /// lists event types (decoding, metric labels) lists these cases.
    public enum EventType: String, Hashable, Sendable, CaseIterable {
        case presented, detentChanged, intercepted, confirmationCancelled, dismissBlocked, dismissed
        case changesMarked, resized, pushed, popped, covered, uncovered
    }

    public enum Kind: Hashable, Sendable {
        case presented(detent: Detent, presentation: Int)
        case detentChanged(from: Detent, to: Detent, by: DetentMover)
        case intercepted(attempted: DragTarget, restoredTo: Detent)
        case confirmationCancelled(detent: Detent)
        case dismissBlocked(attempted: DragTarget)
        /// `screen`: the top of the navigation stack when the sheet went away.
        case dismissed(reason: DismissReason, screen: String)
        case changesMarked(hasChanges: Bool)
        /// Container heights in points.
        case resized(from: Double, to: Double)
        /// `depth`: the stack's size after the change.
        case pushed(screen: String, depth: Int)
        /// `screens`: the names removed, top first.
        case popped(screens: [String], depth: Int)
        case covered(child: SessionID)
        case uncovered(child: SessionID, reason: UncoverReason)

        /// What kind of event this is (the JSON `type`).
        public var type: EventType {
            switch self {
            case .presented: .presented
            case .detentChanged: .detentChanged
            case .intercepted: .intercepted
            case .confirmationCancelled: .confirmationCancelled
            case .dismissBlocked: .dismissBlocked
            case .dismissed: .dismissed
            case .changesMarked: .changesMarked
            case .resized: .resized
            case .pushed: .pushed
            case .popped: .popped
            case .covered: .covered
            case .uncovered: .uncovered
            }
        }
    }

    public var seq: UInt64
    public var at: Timestamp
    public var kind: Kind
    /// Set on events a gesture drag produced.
    public var gesture: GestureResolution? {
        get { gestureBox?.value }
        set { gestureBox = newValue.map(GestureBox.init) }
    }

    /// Gestures are rare and 25 bytes wide; boxing them keeps every event in a session's
    /// 256-slot log at 56 bytes instead of 80.
    private var gestureBox: GestureBox?

    private final class GestureBox: Sendable {
        let value: GestureResolution
        init(_ value: GestureResolution) { self.value = value }
    }

    public init(seq: UInt64, at: Timestamp, kind: Kind, gesture: GestureResolution? = nil) {
        self.seq = seq
        self.at = at
        self.kind = kind
        self.gestureBox = gesture.map(GestureBox.init)
    }

    public static func == (lhs: SheetEvent, rhs: SheetEvent) -> Bool {
        lhs.seq == rhs.seq && lhs.at == rhs.at && lhs.kind == rhs.kind
            && (lhs.gestureBox === rhs.gestureBox || lhs.gesture == rhs.gesture)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(seq)
        hasher.combine(at)
        hasher.combine(kind)
        hasher.combine(gesture)
    }

    private enum CodingKeys: String, CodingKey {
        case seq, type, at, detent, presentation, from, to, by, attempted, restoredTo, reason, screen, gesture
        case hasChanges, depth, screens, child
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        seq = try c.decode(UInt64.self, forKey: .seq)
        at = try c.decode(Timestamp.self, forKey: .at)
        gestureBox = try c.decodeIfPresent(GestureResolution.self, forKey: .gesture).map(GestureBox.init)
        let name = try c.decode(String.self, forKey: .type)
        guard let type = EventType(rawValue: name) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown event type \"\(name)\"")
        }
        switch type {
        case .presented:
            kind = .presented(detent: try c.decode(Detent.self, forKey: .detent),
                              presentation: try c.decode(Int.self, forKey: .presentation))
        case .detentChanged:
            // Events recorded before the app could select a detent carry no `by`: every
            // move then was the user's.
            kind = .detentChanged(from: try c.decode(Detent.self, forKey: .from),
                                  to: try c.decode(Detent.self, forKey: .to),
                                  by: try c.decodeIfPresent(DetentMover.self, forKey: .by) ?? .user)
        case .intercepted:
            kind = .intercepted(attempted: try c.decode(DragTarget.self, forKey: .attempted),
                                restoredTo: try c.decode(Detent.self, forKey: .restoredTo))
        case .confirmationCancelled:
            kind = .confirmationCancelled(detent: try c.decode(Detent.self, forKey: .detent))
        case .dismissBlocked:
            kind = .dismissBlocked(attempted: try c.decode(DragTarget.self, forKey: .attempted))
        case .dismissed:
            // Before navigation every sheet showed only its root screen, named "root".
            kind = .dismissed(reason: try c.decode(DismissReason.self, forKey: .reason),
                              screen: try Self.decodeScreen(c, .screen) ?? NavigationStack.defaultRoot)
        case .changesMarked:
            kind = .changesMarked(hasChanges: try c.decode(Bool.self, forKey: .hasChanges))
        case .resized:
            kind = .resized(from: try c.decode(Double.self, forKey: .from), to: try c.decode(Double.self, forKey: .to))
        case .pushed:
            guard let screen = try Self.decodeScreen(c, .screen) else {
                throw DecodingError.keyNotFound(CodingKeys.screen, .init(codingPath: c.codingPath, debugDescription: "pushed names its screen"))
            }
            kind = .pushed(screen: screen, depth: try c.decode(Int.self, forKey: .depth))
        case .popped:
            let screens = try c.decode([String].self, forKey: .screens)
            guard screens.allSatisfy({ NavigationStack.problem(withName: $0) == nil }) else {
                throw DecodingError.dataCorruptedError(forKey: .screens, in: c, debugDescription: "not screen names: \(screens)")
            }
            kind = .popped(screens: screens, depth: try c.decode(Int.self, forKey: .depth))
        case .covered:
            kind = .covered(child: try Self.decodeID(c, .child))
        case .uncovered:
            kind = .uncovered(child: try Self.decodeID(c, .child), reason: try c.decode(UncoverReason.self, forKey: .reason))
        }
    }

    /// A screen name, checked: events are written without escaping their names.
    private static func decodeScreen(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> String? {
        guard let name = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
        if let problem = NavigationStack.problem(withName: name) {
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "screen " + problem)
        }
        return name
    }

    private static func decodeID(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> SessionID {
        let text = try c.decode(String.self, forKey: key)
        guard let id = SessionID(text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "\"\(text)\" is not a session id")
        }
        return id
    }
}
