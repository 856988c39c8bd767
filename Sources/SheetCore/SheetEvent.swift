/// One recorded change. The log of these is what lets a presenter that listens late still see
/// everything that happened (seed 003's "delegate set too late" cannot happen).
public struct SheetEvent: Hashable, Sendable, Codable {
    /// The kinds of event without their values; the raw value is the JSON `type`. Everything that
    /// lists event types (decoding, metric labels) lists these cases.
    public enum EventType: String, Hashable, Sendable, CaseIterable {
        case presented, detentChanged, intercepted, confirmationCancelled, dismissBlocked, dismissed
    }

    public enum Kind: Hashable, Sendable {
        case presented(detent: Detent, presentation: Int)
        case detentChanged(from: Detent, to: Detent)
        case intercepted(attempted: DragTarget, restoredTo: Detent)
        case confirmationCancelled(detent: Detent)
        case dismissBlocked(attempted: DragTarget)
        case dismissed(reason: DismissReason)

        /// What kind of event this is (the JSON `type`).
        public var type: EventType {
            switch self {
            case .presented: .presented
            case .detentChanged: .detentChanged
            case .intercepted: .intercepted
            case .confirmationCancelled: .confirmationCancelled
            case .dismissBlocked: .dismissBlocked
            case .dismissed: .dismissed
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
        case seq, type, at, detent, presentation, from, to, attempted, restoredTo, reason, gesture
    }

    /// Flat: `{"seq":3,"type":"intercepted","at":"…Z","attempted":"height:300","restoredTo":"medium"}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(seq, forKey: .seq)
        try c.encode(kind.type.rawValue, forKey: .type)
        try c.encode(at, forKey: .at)
        var members = CodableMembers(container: c)
        kind.writeMembers(to: &members)
        if let failure = members.failure { throw failure }
        c = members.container
        try c.encodeIfPresent(gesture, forKey: .gesture)
    }

    /// Encodes a kind's members into the keyed container, keeping the first error.
    private struct CodableMembers: SheetEventMemberWriter {
        var container: KeyedEncodingContainer<CodingKeys>
        var failure: (any Error)?

        mutating func member(_ key: StaticString, string: String) {
            encode(string, key)
        }

        mutating func member(_ key: StaticString, integer: Int) {
            encode(integer, key)
        }

        private mutating func encode(_ value: some Encodable, _ key: StaticString) {
            guard failure == nil else { return }
            do {
                guard let codingKey = CodingKeys(stringValue: key.description) else {
                    preconditionFailure("event member \(key) is missing from SheetEvent.CodingKeys")
                }
                try container.encode(value, forKey: codingKey)
            } catch {
                failure = error
            }
        }
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
            kind = .detentChanged(from: try c.decode(Detent.self, forKey: .from),
                                  to: try c.decode(Detent.self, forKey: .to))
        case .intercepted:
            kind = .intercepted(attempted: try c.decode(DragTarget.self, forKey: .attempted),
                                restoredTo: try c.decode(Detent.self, forKey: .restoredTo))
        case .confirmationCancelled:
            kind = .confirmationCancelled(detent: try c.decode(Detent.self, forKey: .detent))
        case .dismissBlocked:
            kind = .dismissBlocked(attempted: try c.decode(DragTarget.self, forKey: .attempted))
        case .dismissed:
            kind = .dismissed(reason: try c.decode(DismissReason.self, forKey: .reason))
        }
    }
}
