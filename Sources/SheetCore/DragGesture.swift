/// A released drag: translation (points) and velocity (points/s), positive downward.
///
/// The client does not know which detent the user meant, only how the finger moved;
/// `SheetConfiguration.settle` turns that into a target, the same way for every client.
public struct DragGesture: Hashable, Sendable, Codable {
    public var translation: Double
    public var velocity: Double

    /// Largest |translation| and |velocity| the API accepts.
    public static let maximumMagnitude: Double = 100_000

    public init(translation: Double, velocity: Double = 0) {
        self.translation = translation
        self.velocity = velocity
    }

    /// Whether both values are finite and within `maximumMagnitude` (what the API requires).
    public var isValid: Bool {
        Self.admissible(translation) && Self.admissible(velocity)
    }

    static func admissible(_ x: Double) -> Bool { x.isFinite && abs(x) <= maximumMagnitude }

    /// The API validates before calling; this keeps the core total anyway: NaN counts as 0 and
    /// anything beyond the limit (infinities included) as the limit, so no input can crash or
    /// produce a non-finite height.
    static func clamped(_ x: Double) -> Double {
        if x.isNaN { return 0 }
        return min(max(x, -maximumMagnitude), maximumMagnitude)
    }

    private enum CodingKeys: String, CodingKey { case translation, velocity }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        translation = try c.decode(Double.self, forKey: .translation)
        velocity = try c.decodeIfPresent(Double.self, forKey: .velocity) ?? 0
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeNumber(translation, forKey: .translation)
        try c.encodeNumber(velocity, forKey: .velocity)
    }
}

/// How a gesture was settled; attached to the answer and to each event the gesture produced,
/// so a presenter can see why a sheet closed.
public struct GestureResolution: Hashable, Sendable, Decodable {
    public var releasedHeight: Double
    public var projectedHeight: Double
    public var target: DragTarget

    public init(releasedHeight: Double, projectedHeight: Double, target: DragTarget) {
        self.releasedHeight = releasedHeight
        self.projectedHeight = projectedHeight
        self.target = target
    }

    private enum CodingKeys: String, CodingKey { case releasedHeight, projectedHeight, target }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        releasedHeight = try c.decode(Double.self, forKey: .releasedHeight)
        projectedHeight = try c.decode(Double.self, forKey: .projectedHeight)
        target = try c.decode(DragTarget.self, forKey: .target)
    }
}

extension SheetConfiguration {
    /// The gesture rule, from the detent at `index`:
    /// r = h0 − T; p = r − (V / 1000) · d / (1 − d); the nearest of `closed` (0) and the detents'
    /// heights to p, ties to the taller — except that a height shared with the current detent
    /// lands on the current detent.
    ///
    /// The factor is multiplied before dividing by 1000 (`V · 499 / 1000`) so whole inputs give
    /// exact, readable heights. Choosing by comparing the two neighbours' distances (rather than
    /// a running minimum) keeps the choice monotonic in p even with rounding.
    func settle(_ gesture: DragGesture, from index: Int, in layout: ContainerLayout) -> (GestureResolution, Landing) {
        let t = DragGesture.clamped(gesture.translation)
        let v = DragGesture.clamped(gesture.velocity)
        let released = layout.heights[index] - t
        let projected = released - v * storage.decelerationRate.projectionFactor / 1000
        let candidates = layout.candidates
        var chosen = 0
        while chosen + 1 < candidates.count,
              candidates[chosen + 1].height - projected <= projected - candidates[chosen].height {
            chosen += 1
        }
        // Detents that resolve to the same height as the current one (e.g. `medium` and
        // `fraction:0.5`) are the same place on screen: landing there keeps the current detent,
        // so a zero gesture never moves the sheet. Otherwise ties go to the later detent.
        let landing: Landing = candidates[chosen].height == layout.heights[index] ? .detent(index) : candidates[chosen].landing
        let target: DragTarget = switch landing {
        case .closed: .closed
        case .detent(let i): .detent(storage.detents[i])
        }
        let resolution = GestureResolution(releasedHeight: Self.reported(released),
                                           projectedHeight: Self.reported(projected), target: target)
        return (resolution, landing)
    }

    /// Heights are reported rounded to a millionth of a point: `744 − 1234 × 499 / 1000` is
    /// 128.23400000000004 in binary floating point, and the answer should say 128.234. The
    /// target is still chosen from the unrounded value, so the rule itself stays exact.
    static func reported(_ height: Double) -> Double {
        let scaled = height * 1_000_000
        guard scaled.isFinite, abs(scaled) < 4e15 else { return height }
        // Half away from zero without libm: below 2^52 the fraction `scaled − whole` is exact.
        var whole = Int64(scaled)
        let fraction = scaled - Double(whole)
        if fraction >= 0.5 { whole += 1 } else if fraction <= -0.5 { whole -= 1 }
        return Double(whole) / 1_000_000
    }
}
