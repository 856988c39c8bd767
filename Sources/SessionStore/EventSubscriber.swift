import SheetCore

/// Receives a session's events as they are recorded, for a Server-Sent Events stream.
/// The store calls it on its actor, in order and without gaps, so it must not block.
public protocol EventSubscriber: AnyObject, Sendable {
    /// New events. Return false to stop receiving (the reader fell behind, or asked to stop).
    func receive(_ events: [SheetEvent]) -> Bool
    /// The store ended the subscription.
    func ended(_ reason: SubscriptionEnd)
}

public enum SubscriptionEnd: Sendable, Hashable {
    case sessionDeleted
    case shuttingDown
}

/// Names one subscription so its stream can leave when its client goes away.
public struct SubscriptionToken: Sendable, Hashable {
    public let session: SessionID
    public let number: UInt64

    public init(session: SessionID, number: UInt64) {
        self.session = session
        self.number = number
    }
}

/// How a long-poll ended.
public enum WaitOutcome: Sendable {
    case events(EventsPage)
    case timedOut(version: UInt64)
}
