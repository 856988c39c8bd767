#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request target as the server reads it from the raw bytes of the request line, not as
/// libmicrohttpd would unescape it.
///
/// libmicrohttpd 0.9.75 decodes "%2F" into a path separator and ends the path at "%00", so
/// `/sessions/ab%2Fdrag` would reach a different route than a proxy in front sees, and
/// `/sessions/ab%00x` would name the session `ab`. Here the path is percent-decoded except for
/// the three escapes whose decoding would change its structure: `%2F` ("/"), `%00` (NUL) and
/// `%25` ("%", kept so that a `%` in the decoded path always starts one of the kept escapes).
/// A decoded path therefore never holds a separator or a NUL the client did not send as one.
///
/// Absolute form (`http://host/path?q`, RFC 9112 §3.2.2) is served like origin form: the scheme
/// and authority are dropped. The query is split on `&`, then on the first `=`; `+` is a space
/// and every escape is decoded (a value may hold a NUL; the application validates values).
public struct RequestTarget: Equatable, Sendable {
    public var path: String
    public var query: [(String, String)]

    public static func == (a: RequestTarget, b: RequestTarget) -> Bool {
        a.path == b.path && a.query.elementsEqual(b.query) { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    public init(path: String, query: [(String, String)] = []) {
        self.path = path
        self.query = query
    }

    /// Reads a request target as it stands in the request line.
    public init(raw: String) {
        // Nearly every target is a bare origin-form path: nothing to decode or split.
        if Self.isBarePath(raw) {
            path = raw
            query = []
            return
        }
        var utf8 = Substring(raw).utf8[...]
        utf8 = Self.droppingSchemeAndAuthority(utf8)
        let questionMark = utf8.firstIndex(of: UInt8(ascii: "?"))
        let pathBytes = utf8[utf8.startIndex..<(questionMark ?? utf8.endIndex)]
        path = pathBytes.isEmpty ? "/" : Self.decode(pathBytes, keepingStructure: true)
        query = []
        if let questionMark {
            for pair in utf8[utf8.index(after: questionMark)...].split(separator: UInt8(ascii: "&")) {
                if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                    query.append((Self.decode(pair[pair.startIndex..<equals], keepingStructure: false),
                                  Self.decode(pair[pair.index(after: equals)...], keepingStructure: false)))
                } else {
                    query.append((Self.decode(pair, keepingStructure: false), ""))
                }
            }
        }
    }

    /// Starts with "/" and holds no "%" and no "?": the path as it stands, with no query.
    /// (memchr: a byte loop cost five instructions a byte, on every request.)
    private static func isBarePath(_ raw: String) -> Bool {
        raw.utf8.withContiguousStorageIfAvailable { bytes in
            guard bytes.first == UInt8(ascii: "/"), let base = bytes.baseAddress else { return false }
            return memchr(base, Int32(UInt8(ascii: "%")), bytes.count) == nil
                && memchr(base, Int32(UInt8(ascii: "?")), bytes.count) == nil
        } ?? false
    }

    /// `http://host[:port]` or `https://…` (any case) before the path, dropped.
    private static func droppingSchemeAndAuthority(_ bytes: Substring.UTF8View.SubSequence) -> Substring.UTF8View.SubSequence {
        guard let first = bytes.first, first != UInt8(ascii: "/") else { return bytes }
        for scheme in ["http://", "https://"] {
            let prefix = bytes.prefix(scheme.utf8.count)
            guard prefix.count == scheme.utf8.count,
                  prefix.elementsEqual(scheme.utf8, by: { String.asciiLower($0) == $1 }) else { continue }
            let authority = bytes.dropFirst(scheme.utf8.count)
            let end = authority.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? authority.endIndex
            return authority[end...]
        }
        return bytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Percent-decodes; a malformed escape stays as it is. In a path (`keepingStructure`) the
    /// escapes of "/", NUL and "%" stay encoded; in the query "+" is a space.
    private static func decode(_ bytes: Substring.UTF8View.SubSequence, keepingStructure: Bool) -> String {
        guard bytes.contains(where: { $0 == UInt8(ascii: "%") || (!keepingStructure && $0 == UInt8(ascii: "+")) }) else {
            return String(Substring(bytes))
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"),
               let high = bytes.index(index, offsetBy: 1, limitedBy: bytes.endIndex), high < bytes.endIndex,
               let low = bytes.index(high, offsetBy: 1, limitedBy: bytes.endIndex), low < bytes.endIndex,
               let h = hexValue(bytes[high]), let l = hexValue(bytes[low]) {
                let decoded = h << 4 | l
                if keepingStructure && (decoded == 0 || decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "%")) {
                    out.append(contentsOf: [byte, bytes[high], bytes[low]])
                } else {
                    out.append(decoded)
                }
                index = bytes.index(after: low)
                continue
            }
            out.append(!keepingStructure && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = bytes.index(after: index)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
