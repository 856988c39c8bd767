/// Why `HTTPServer.start()` failed.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// A struct around the package's enum, so a client compares codes and a new one never
    /// breaks its `switch`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Base: String, Sendable {
            case invalidAddress, bindFailed, startFailed
        }

        package let base: Base
        package init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        public static let invalidAddress = Code(.invalidAddress)
        public static let bindFailed = Code(.bindFailed)
        public static let startFailed = Code(.startFailed)
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
