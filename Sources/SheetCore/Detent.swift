/// A height at which a presented sheet rests, as the API writes it.
///
/// Kept symbolic (not resolved to points) because `medium` and `fraction:F` follow the container
/// height, and because the API answers detents in the form they were configured.
public enum Detent: Hashable, Sendable, Codable, CustomStringConvertible {
    case large
    case medium
    /// `containerHeight × F`, 0 < F ≤ 1.
    case fraction(Double)
    /// `min(H, containerHeight)` points, H > 0 and finite.
    case height(Double)

    /// Parses `large`, `medium`, `fraction:F`, `height:H` (kinds lower case only).
    /// F and H follow the strict grammar of `DecimalText`: unsigned, no spaces, no nan/inf/hex.
    public init(parsing string: String) throws(DetentError) {
        let utf8 = string.utf8
        if utf8.isEmpty {
            throw DetentError(code: .empty, input: string,
                              message: "a detent is required: large, medium, fraction:F or height:H")
        }
        if string == "large" { self = .large; return }
        if string == "medium" { self = .medium; return }
        let kind: Kind
        let rest: Substring
        if string.hasPrefix("fraction:") {
            kind = .fraction
            rest = string.dropFirst(9)
        } else if string.hasPrefix("height:") {
            kind = .height
            rest = string.dropFirst(7)
        } else {
            throw DetentError(code: .unknownKind, input: string,
                              message: "\(Self.quoted(string)) is not a detent: expected large, medium, fraction:F or height:H")
        }
        switch DecimalText.read(rest.utf8) {
        case .malformed:
            throw DetentError(code: .invalidNumber, input: string,
                              message: "\(kind.name) needs a plain unsigned decimal such as 300, 0.25, .5 or 3e2, got \(Self.quoted(String(rest)))")
        case .negative:
            throw DetentError(code: .outOfRange, input: string, message: kind.rangeMessage(String(rest)))
        case .number(let value):
            let detent: Detent = kind == .fraction ? .fraction(value) : .height(value)
            guard detent.isValid else {
                throw DetentError(code: .outOfRange, input: string, message: kind.rangeMessage(String(rest)))
            }
            self = detent
        }
    }

    /// Canonical form: "large", "medium", "fraction:0.25", "height:300", "height:300.5".
    public var description: String {
        switch self {
        case .large: "large"
        case .medium: "medium"
        case .fraction(let f): "fraction:" + DecimalText.canonical(f)
        case .height(let h): "height:" + DecimalText.canonical(h)
        }
    }

    /// Whether the value keeps its kind's range. Parsed detents always do; values built in code
    /// might not, and the configuration refuses those.
    public var isValid: Bool {
        switch self {
        case .large, .medium: true
        case .fraction(let f): f > 0 && f <= 1
        case .height(let h): h > 0 && h.isFinite
        }
    }

    /// Points at which the sheet rests in a container of the given height.
    public func resolvedHeight(containerHeight: Double) -> Double {
        switch self {
        case .large: containerHeight
        case .medium: containerHeight * 0.5
        case .fraction(let f): containerHeight * f
        case .height(let h): min(h, containerHeight)
        }
    }

    /// Sort order of a session's detents: resolved height, ties by canonical string.
    public static func ordered(_ a: Detent, _ b: Detent, containerHeight: Double) -> Bool {
        let ha = a.resolvedHeight(containerHeight: containerHeight)
        let hb = b.resolvedHeight(containerHeight: containerHeight)
        if ha != hb { return ha < hb }
        return a.description < b.description
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try Detent(parsing: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    private enum Kind {
        case fraction, height
        var name: String { self == .fraction ? "fraction" : "height" }
        func rangeMessage(_ text: String) -> String {
            switch self {
            case .fraction: "fraction must be greater than 0 and at most 1, got \(text)"
            case .height: "height must be a finite number of points greater than 0, got \(text)"
            }
        }
    }

    /// Echoes user input in messages, cut short so a huge string cannot bloat an error body.
    static func quoted(_ text: String) -> String {
        let limit = 40
        return text.count <= limit ? "\"\(text)\"" : "\"\(text.prefix(limit))…\""
    }
}
