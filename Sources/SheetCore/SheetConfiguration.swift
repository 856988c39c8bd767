/// What a swipe past the smallest detent does.
public enum DismissPolicy: String, Sendable, Codable, CaseIterable { case allow, intercept, block }

/// Whether an interception waits for the app's answer (`confirm`) or only reports (`notify`).
public enum InterceptAction: String, Sendable, Codable, CaseIterable { case confirm, notify }

/// How far a released gesture coasts before it settles.
public enum DecelerationRate: String, Sendable, Codable, CaseIterable {
    case normal, fast

    /// UIKit's `UIScrollView.DecelerationRate` values.
    public var value: Double {
        switch self {
        case .normal: 0.998
        case .fast: 0.99
        }
    }

    /// `d / (1 − d)` written out exactly (499 and 99): computing it from `value` in binary
    /// floating point gives 499.00000000000045, which would leak noise into projected heights.
    public var projectionFactor: Double {
        switch self {
        case .normal: 499
        case .fast: 99
        }
    }
}

/// When the dismiss policy protects the sheet: always, or only while the app reports unsaved
/// changes (Apple's sample sets `isModalInPresentation = hasChanges`).
public enum ProtectWhen: String, Sendable, Codable, CaseIterable { case always, hasChanges }

/// A session's configuration, fixed when it is created and validated once, here.
///
/// Stored behind one immutable reference: every `Sheet` carries its configuration, and sharing
/// it keeps a session's state a few words wide while the lookup tables the reducer uses (resolved
/// heights, gesture candidates) are computed only once. The reference is never mutated, so the
/// type keeps value semantics.
public struct SheetConfiguration: Hashable, Sendable, Decodable {
    public static let maximumDetents = 16
    public static let defaultContainerHeight: Double = 844
    public static let containerHeightRange: ClosedRange<Double> = 1...10_000

    let storage: Storage

    /// The effective set, distinct, sorted by resolved height then canonical string.
    public var detents: [Detent] { storage.detents }
    public var defaultDetent: Detent { storage.detents[storage.defaultIndex] }
    public var thresholdDetent: Detent? { storage.thresholdIndex.map { storage.detents[$0] } }
    public var dismissPolicy: DismissPolicy { storage.dismissPolicy }
    public var interceptAction: InterceptAction { storage.interceptAction }
    public var containerHeight: Double { storage.containerHeight }
    public var decelerationRate: DecelerationRate { storage.decelerationRate }
    public var protectWhen: ProtectWhen { storage.protectWhen }
    /// The tallest detent at which the sheet leaves what is behind it undimmed and interactive.
    public var largestUndimmedDetent: Detent? { storage.undimmedIndex.map { storage.detents[$0] } }
    /// The first screen of the sheet's navigation stack.
    public var rootScreen: String { storage.rootScreen }

    /// nil means "not given": the defaults below apply. The first failing rule,
    /// in the order the fields are listed, is thrown.
    public init(
        detents: [Detent]? = nil,
        defaultDetent: Detent? = nil,
        thresholdDetent: Detent? = nil,
        dismissPolicy: DismissPolicy? = nil,
        interceptAction: InterceptAction? = nil,
        containerHeight: Double? = nil,
        decelerationRate: DecelerationRate? = nil,
        protectWhen: ProtectWhen? = nil,
        largestUndimmedDetent: Detent? = nil,
        rootScreen: String? = nil
    ) throws(ConfigurationError) {
        let given = detents ?? [.large]
        if given.isEmpty {
            throw ConfigurationError(code: .emptyDetents, field: "detents",
                                     message: "detents must name at least one detent")
        }
        if let bad = given.first(where: { !$0.isValid }) {
            throw Self.invalid(bad, field: "detents")
        }
        if let d = defaultDetent, !d.isValid { throw Self.invalid(d, field: "defaultDetent") }
        if let t = thresholdDetent, !t.isValid { throw Self.invalid(t, field: "thresholdDetent") }

        let container = containerHeight ?? Self.defaultContainerHeight
        let containerIsValid = container.isFinite && Self.containerHeightRange.contains(container)
        // Ordering only matters once the container is valid; until the containerHeight rule is
        // reached, sort against the default so earlier rules can still be judged.
        let sortHeight = containerIsValid ? container : Self.defaultContainerHeight

        var set: [Detent] = []
        for d in given + [defaultDetent, thresholdDetent].compactMap({ $0 }) where !set.contains(d) {
            set.append(d)
        }
        if set.count > Self.maximumDetents {
            throw ConfigurationError(code: .tooManyDetents, field: "detents",
                                     message: "a sheet has at most \(Self.maximumDetents) distinct detents (counting the default and the threshold), got \(set.count)")
        }
        set.sort { Detent.ordered($0, $1, containerHeight: sortHeight) }
        let chosenDefault = defaultDetent ?? set[set.count - 1]

        if let t = thresholdDetent {
            if t == chosenDefault {
                throw ConfigurationError(code: .thresholdIsDefault, field: "thresholdDetent",
                                         message: "the threshold \(t) cannot also be the default detent: the sheet would intercept as it appears")
            }
            if containerIsValid {
                let th = t.resolvedHeight(containerHeight: container)
                if let other = set.first(where: { $0 != t && $0.resolvedHeight(containerHeight: container) <= th }) {
                    throw ConfigurationError(code: .thresholdNotLowest, field: "thresholdDetent",
                                             message: "the threshold \(t) must resolve strictly lower than every other detent, but \(other) is not taller")
                }
            }
        }
        let policy = dismissPolicy ?? (thresholdDetent == nil ? .allow : .intercept)
        if thresholdDetent != nil && policy == .allow {
            throw ConfigurationError(code: .thresholdWithAllow, field: "dismissPolicy",
                                     message: "dismissPolicy allow contradicts a thresholdDetent: a swipe passes the threshold on its way down; use intercept or block")
        }
        if !containerIsValid {
            throw ConfigurationError(code: .containerHeightOutOfRange, field: "containerHeight",
                                     message: "containerHeight must be a number of points from 1 to 10000, got \(DecimalText.canonical(container))")
        }
        let protect = protectWhen ?? .always
        if protect == .hasChanges && policy == .allow {
            throw ConfigurationError(code: .protectWhenWithAllow, field: "protectWhen",
                                     message: "protectWhen hasChanges needs a dismissPolicy that protects (intercept or block); with allow there is nothing to switch on")
        }
        var undimmedIndex: Int?
        if let d = largestUndimmedDetent {
            if !d.isValid { throw Self.invalid(d, field: "largestUndimmedDetent") }
            guard let i = set.firstIndex(of: d) else {
                throw ConfigurationError(code: .unknownDetent, field: "largestUndimmedDetent",
                                         message: "largestUndimmedDetent \(d) is not one of this sheet's detents (\(set.map(\.description).joined(separator: ", "))); it names a detent, it does not add one")
            }
            if d == thresholdDetent {
                throw ConfigurationError(code: .undimmedIsThreshold, field: "largestUndimmedDetent",
                                         message: "largestUndimmedDetent cannot be the threshold \(d): the sheet never rests there")
            }
            undimmedIndex = i
        }
        let root = rootScreen ?? NavigationStack.defaultRoot
        if let problem = NavigationStack.problem(withName: root) {
            throw ConfigurationError(code: .invalidScreen, field: "rootScreen", message: "rootScreen " + problem)
        }
        storage = Storage(
            detents: set,
            defaultIndex: set.firstIndex(of: chosenDefault)!,
            thresholdIndex: thresholdDetent.flatMap { set.firstIndex(of: $0) },
            dismissPolicy: policy,
            interceptAction: interceptAction ?? .confirm,
            containerHeight: container,
            decelerationRate: decelerationRate ?? .normal,
            protectWhen: protect,
            undimmedIndex: undimmedIndex,
            rootScreen: root)
    }

    private static func invalid(_ d: Detent, field: String) -> ConfigurationError {
        ConfigurationError(code: .invalidDetent, field: field,
                           message: "\(d) is outside its range (fraction 0 < F ≤ 1, height H > 0 and finite)")
    }

    /// Position of `detent` in `detents`, or nil when the session does not have it.
    func index(of detent: Detent) -> Int? {
        let all = storage.detents
        for i in all.indices where all[i] == detent { return i }
        return nil
    }

    public static func == (lhs: SheetConfiguration, rhs: SheetConfiguration) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.isEqual(to: rhs.storage)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.detents)
        hasher.combine(storage.defaultIndex)
        hasher.combine(storage.thresholdIndex)
        hasher.combine(storage.dismissPolicy)
        hasher.combine(storage.interceptAction)
        hasher.combine(storage.containerHeight)
        hasher.combine(storage.decelerationRate)
        hasher.combine(storage.protectWhen)
        hasher.combine(storage.undimmedIndex)
        hasher.combine(storage.rootScreen)
    }

    private enum CodingKeys: String, CodingKey {
        case detents, defaultDetent, thresholdDetent, dismissPolicy, interceptAction, containerHeight, decelerationRate
        case protectWhen, largestUndimmedDetent, rootScreen
    }

    /// Missing keys take their defaults; every rule is checked again, so a stored configuration
    /// that no longer validates is refused rather than trusted.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                detents: c.decodeIfPresent([Detent].self, forKey: .detents),
                defaultDetent: c.decodeIfPresent(Detent.self, forKey: .defaultDetent),
                thresholdDetent: c.decodeIfPresent(Detent.self, forKey: .thresholdDetent),
                dismissPolicy: c.decodeIfPresent(DismissPolicy.self, forKey: .dismissPolicy),
                interceptAction: c.decodeIfPresent(InterceptAction.self, forKey: .interceptAction),
                containerHeight: c.decodeIfPresent(Double.self, forKey: .containerHeight),
                decelerationRate: c.decodeIfPresent(DecelerationRate.self, forKey: .decelerationRate),
                protectWhen: c.decodeIfPresent(ProtectWhen.self, forKey: .protectWhen),
                largestUndimmedDetent: c.decodeIfPresent(Detent.self, forKey: .largestUndimmedDetent),
                rootScreen: c.decodeIfPresent(String.self, forKey: .rootScreen))
        } catch let error as ConfigurationError {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath + [CodingKeys(rawValue: error.field) ?? CodingKeys.detents],
                debugDescription: error.message))
        }
    }

    /// The validated configuration and the tables derived from it.
    final class Storage: Sendable {
        let detents: [Detent]
        let defaultIndex: Int
        let thresholdIndex: Int?
        let dismissPolicy: DismissPolicy
        let interceptAction: InterceptAction
        let containerHeight: Double
        let decelerationRate: DecelerationRate
        let protectWhen: ProtectWhen
        let undimmedIndex: Int?
        let rootScreen: String
        /// `[rootScreen]`, built once: every sheet's stack starts as this array, so the sheets
        /// that never navigate share one buffer instead of each holding its own.
        let rootStack: [String]
        /// The detents at the height the session was created with: where every sheet starts,
        /// shared by all of them until one is resized.
        let layout: ContainerLayout

        init(detents: [Detent], defaultIndex: Int, thresholdIndex: Int?, dismissPolicy: DismissPolicy,
             interceptAction: InterceptAction, containerHeight: Double, decelerationRate: DecelerationRate,
             protectWhen: ProtectWhen, undimmedIndex: Int?, rootScreen: String) {
            self.detents = detents
            self.defaultIndex = defaultIndex
            self.thresholdIndex = thresholdIndex
            self.dismissPolicy = dismissPolicy
            self.interceptAction = interceptAction
            self.containerHeight = containerHeight
            self.decelerationRate = decelerationRate
            self.protectWhen = protectWhen
            self.undimmedIndex = undimmedIndex
            self.rootScreen = rootScreen
            self.rootStack = [rootScreen]
            self.layout = ContainerLayout(detents: detents, thresholdIndex: thresholdIndex, containerHeight: containerHeight)
        }

        func isEqual(to other: Storage) -> Bool {
            detents == other.detents && defaultIndex == other.defaultIndex
                && thresholdIndex == other.thresholdIndex && dismissPolicy == other.dismissPolicy
                && interceptAction == other.interceptAction && containerHeight == other.containerHeight
                && decelerationRate == other.decelerationRate && protectWhen == other.protectWhen
                && undimmedIndex == other.undimmedIndex && rootScreen == other.rootScreen
        }
    }
}

/// Where a drag lands, as the reducer sees it: an index into the configuration's detents.
enum Landing: Hashable, Sendable {
    case closed
    case detent(Int)
}
