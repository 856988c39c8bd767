/// Where a session is in its life. Changes are set-operations, never toggles, so repeating a
/// request can never flip a sheet back open.
public enum Phase: String, Sendable, Codable, CaseIterable { case presented, confirming, dismissed }

/// Why a sheet was dismissed; reported in the `dismissed` event.
/// `parentDismissed`: the sheet below was dismissed, which takes every sheet above it down first.
public enum DismissReason: String, Sendable, Codable, CaseIterable {
    case swipe, done, programmatic, discarded, saved, parentDismissed
}

/// Why a covered sheet was uncovered: its child's dismissal reason, or the child was deleted.
public enum UncoverReason: String, Sendable, Codable, CaseIterable {
    case swipe, done, programmatic, discarded, saved, parentDismissed, deleted

    public init(_ reason: DismissReason) {
        self = switch reason {
        case .swipe: .swipe
        case .done: .done
        case .programmatic: .programmatic
        case .discarded: .discarded
        case .saved: .saved
        case .parentDismissed: .parentDismissed
        }
    }
}

/// Who moved the sheet to another detent: the user's drag or the app's `select`.
public enum DetentMover: String, Sendable, Codable, CaseIterable { case user, app }

/// One change to a sheet's navigation stack.
public enum NavigationStep: Hashable, Sendable {
    /// Shows a screen on top of the stack.
    case push(String)
    /// Removes this many screens from the top (at least 1; never the root).
    case pop(Int)
}

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
    /// Drag and release with a translation and velocity; the target is decided by `SheetConfiguration.settle`.
    case gesture(DragGesture)
    case confirm(ConfirmAction)
    case dismiss(AppDismissReason)
    case present
    /// The app reports whether there is something to lose (a set-operation, never a toggle).
    case changes(hasChanges: Bool)
    /// The app moves the sheet to a detent, as UIKit's `selectedDetentIdentifier` does.
    case select(Detent)
    /// The container's height changed (rotation, split view, window resizing).
    case resize(containerHeight: Double)
    case navigate(NavigationStep)
}
