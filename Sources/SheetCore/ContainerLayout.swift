/// Where a configuration's detents sit in a container of one height: their order, their points,
/// the heights a released gesture can settle at, and whether the threshold can intercept there.
///
/// Rotation and window resizing change the height while the sheet keeps its detent by identity
/// (UIKit's `invalidateDetents()` keeps `selectedDetentIdentifier`), so the detents themselves
/// stay indexed as the configuration sorted them and this table says how they stand now. Built
/// once per height and shared: immutable, so `Sendable` by construction.
final class ContainerLayout: Hashable, Sendable {
    let containerHeight: Double
    /// Indices into the configuration's detents, in detent order at this height (resolved
    /// height, ties by canonical string).
    let order: [Int]
    /// Resolved points, by configuration index.
    let heights: [Double]
    /// Whether the threshold resolves strictly lower than every other detent here; false when
    /// there is no threshold. An inactive threshold neither intercepts nor attracts a gesture.
    let thresholdActive: Bool
    /// Gesture candidates, ascending: `closed` at 0, then each distinct resolved height with the
    /// *last* detent in order that has it (ties go to the taller one); an inactive threshold is
    /// left out.
    let candidates: [GestureCandidate]

    init(detents: [Detent], thresholdIndex: Int?, containerHeight: Double) {
        self.containerHeight = containerHeight
        let heights = detents.map { $0.resolvedHeight(containerHeight: containerHeight) }
        self.heights = heights
        order = detents.indices.sorted { Detent.ordered(detents[$0], detents[$1], containerHeight: containerHeight) }
        if let t = thresholdIndex {
            thresholdActive = heights.indices.allSatisfy { $0 == t || heights[$0] > heights[t] }
        } else {
            thresholdActive = false
        }
        var candidates = [GestureCandidate(height: 0, landing: .closed)]
        for i in order where i != thresholdIndex || thresholdActive {
            if candidates[candidates.count - 1].height == heights[i] { candidates.removeLast() }
            candidates.append(GestureCandidate(height: heights[i], landing: .detent(i)))
        }
        self.candidates = candidates
    }

    /// A layout follows from the configuration and the height; sheets compare their
    /// configurations separately, so the height is all that tells two layouts apart.
    static func == (lhs: ContainerLayout, rhs: ContainerLayout) -> Bool {
        lhs === rhs || lhs.containerHeight == rhs.containerHeight
    }

    func hash(into hasher: inout Hasher) { hasher.combine(containerHeight) }
}

struct GestureCandidate: Sendable {
    var height: Double
    var landing: Landing
}
