// The public errors are structs whose `Code` is a struct around a package-wide enum, as
// async-http-client's `HTTPClientError` is: a client compares codes (`error.code == .outOfRange`,
// or `case .outOfRange:` in a `switch` with a `default`), so a code added later never breaks its
// `switch`, while code inside this package switches over `code.base` and the compiler names every
// place a new code must be handled.

/// A detent string that cannot be read. The API answers it as `400 invalid_detent`, naming the
/// field; `message` is meant to be shown to a person as is.
public struct DetentError: Error, Hashable, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Base: String, Sendable {
            /// The string is empty.
            case empty
            /// Not `large`, `medium`, `fraction:`, `height:` (nor `closed` where a drag target is read).
            case unknownKind
            /// The kind is right but the number is not a plain unsigned decimal.
            case invalidNumber
            /// A well-formed number outside the kind's range (fraction 0 < F ≤ 1, height H > 0, finite).
            case outOfRange
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        public static let empty = Code(.empty)
        public static let unknownKind = Code(.unknownKind)
        public static let invalidNumber = Code(.invalidNumber)
        public static let outOfRange = Code(.outOfRange)
    }

    public var code: Code
    public var input: String
    public var message: String

    public init(code: Code, input: String, message: String) {
        self.code = code
        self.input = input
        self.message = message
    }
}

/// A configuration rule that failed. `field` names the request field to blame, so the API can
/// answer `400` with it directly.
public struct ConfigurationError: Error, Hashable, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Base: String, Sendable {
            /// `detents: []` given.
            case emptyDetents
            /// The effective set (detents ∪ default ∪ threshold) holds more than 16 detents.
            case tooManyDetents
            /// The threshold does not resolve strictly lower than every other detent.
            case thresholdNotLowest
            /// The threshold is the default detent: the sheet would intercept as it appears.
            case thresholdIsDefault
            /// `dismissPolicy: allow` with a threshold: a swipe would pass the threshold on its way down.
            case thresholdWithAllow
            /// Not finite, or outside 1...10000 points.
            case containerHeightOutOfRange
            /// A `Detent` value built in code (not parsed) that breaks its own range, e.g. `.fraction(2)`.
            /// Parsed detents never produce it; it exists so the initializer never accepts nonsense.
            case invalidDetent
            /// `protectWhen: hasChanges` with `dismissPolicy: allow`: nothing to switch on or off.
            case protectWhenWithAllow
            /// A field names a detent outside the effective set where it may not add one
            /// (`largestUndimmedDetent`); the API answers `unknown_detent`.
            case unknownDetent
            /// `largestUndimmedDetent` is the threshold, where the sheet never rests.
            case undimmedIsThreshold
            /// A screen name outside 1 to 64 characters of `A–Z a–z 0–9 . _ -`.
            case invalidScreen
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        public static let emptyDetents = Code(.emptyDetents)
        public static let tooManyDetents = Code(.tooManyDetents)
        public static let thresholdNotLowest = Code(.thresholdNotLowest)
        public static let thresholdIsDefault = Code(.thresholdIsDefault)
        public static let thresholdWithAllow = Code(.thresholdWithAllow)
        public static let containerHeightOutOfRange = Code(.containerHeightOutOfRange)
        public static let invalidDetent = Code(.invalidDetent)
        public static let protectWhenWithAllow = Code(.protectWhenWithAllow)
        public static let unknownDetent = Code(.unknownDetent)
        public static let undimmedIsThreshold = Code(.undimmedIsThreshold)
        public static let invalidScreen = Code(.invalidScreen)
    }

    public var code: Code
    public var field: String
    public var message: String

    public init(code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }
}

/// Why `Sheet.apply` refused an action. Every case leaves the sheet unchanged.
public struct SheetError: Error, Hashable, Sendable {
    /// The refusal's stable name; `rawValue` is the API's `code` string for it, and the API's own
    /// list of codes takes these from here rather than spelling them again.
    public struct Code: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        package enum Base: String, Sendable, CaseIterable {
            case confirmationPending = "confirmation_pending"
            case sheetDismissed = "sheet_dismissed"
            case noPendingConfirmation = "no_pending_confirmation"
            case sheetPresented = "sheet_presented"
            /// The drag target names a detent the session was not configured with: an error in the
            /// request's body, where the others are conflicts with the sheet's phase.
            case unknownDetent = "unknown_detent"
            /// A value the action cannot take (the threshold as a `select` target, a screen name
            /// outside the rule, `pop` below 1, a container height out of range): a 400.
            case invalidField = "invalid_field"
            /// Another sheet is presented over this one: it takes no user gesture.
            case sheetCovered = "sheet_covered"
            /// A drag to a threshold that does not resolve lowest at the current container height.
            case thresholdInactive = "threshold_inactive"
            /// The navigation stack already holds its maximum of screens.
            case stackFull = "stack_full"
            /// More screens to pop than stand above the root.
            case cannotPop = "cannot_pop"
            /// A chain of sheets already holds its maximum of sessions.
            case tooDeep = "too_deep"
            /// A dismissed child can be presented again only over a presented, uncovered parent.
            case parentUnavailable = "parent_unavailable"
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        /// The code as the API spells it, e.g. `sheet_dismissed`.
        public var rawValue: String { base.rawValue }
        public var description: String { base.rawValue }
        public static let allCases = Base.allCases.map(Code.init)

        public static let confirmationPending = Code(.confirmationPending)
        public static let sheetDismissed = Code(.sheetDismissed)
        public static let noPendingConfirmation = Code(.noPendingConfirmation)
        public static let sheetPresented = Code(.sheetPresented)
        public static let unknownDetent = Code(.unknownDetent)
        public static let invalidField = Code(.invalidField)
        public static let sheetCovered = Code(.sheetCovered)
        public static let thresholdInactive = Code(.thresholdInactive)
        public static let stackFull = Code(.stackFull)
        public static let cannotPop = Code(.cannotPop)
        public static let tooDeep = Code(.tooDeep)
        public static let parentUnavailable = Code(.parentUnavailable)
    }

    public var code: Code
    public var message: String
    public var field: String?

    public init(code: Code, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }
}
