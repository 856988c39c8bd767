/// Where a session is in its life. Changes are set-operations, never toggles, so repeating a
/// request can never flip a sheet back open (the bug seed 001 describes).
public enum Phase: String, Sendable, Codable, CaseIterable { case presented, confirming, dismissed }

/// Why a sheet was dismissed; reported in the `dismissed` event.
public enum DismissReason: String, Sendable, Codable, CaseIterable { case swipe, done, programmatic, discarded, saved }

/// The app's answer to an interception's "Discard changes?" question.
public enum ConfirmAction: String, Sendable, Codable, CaseIterable { case discard, save, cancel }

/// Reasons an app may give to `dismiss` (the subset of `DismissReason` the app itself causes).
public enum AppDismissReason: String, Sendable, Codable, CaseIterable {
    case done, programmatic

    public var dismissReason: DismissReason {
        switch self {
        case .done: .done
        case .programmatic: .programmatic
        }
    }
}

/// Everything a client can ask of a sheet; `Sheet.apply` is the only way state changes.
public enum SheetAction: Hashable, Sendable {
    /// Drag and release at a known target.
    case drag(DragTarget)
    /// Drag and release with a translation and velocity; the target is decided by issue 5's rule.
    case gesture(DragGesture)
    case confirm(ConfirmAction)
    case dismiss(AppDismissReason)
    case present
}
