/// Why `HTTPServer.start()` failed.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidAddress, bindFailed, startFailed
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
