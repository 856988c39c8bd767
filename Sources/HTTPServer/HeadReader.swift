import CMicroHTTPD

// Reading a request's head out of libmicrohttpd, and the checks libmicrohttpd 0.9.75 leaves to
// the application: it takes "Content-Length : 5" as a header named "Content-Length " (and the
// body as the next request), cuts a field value at a NUL, serves HTTP/1.1 without Host, and
// unescapes "%2F" and "%00" into the path. The first access-handler call sees all of it before
// the next request on the connection is parsed, so refusing there (400, connection closed)
// stops a smuggled request.

/// MHD_OPTION_URI_LOG_CALLBACK: the raw target, before libmicrohttpd touches it. Kept in the
/// connection's state for the request's first access-handler call, which follows on the same
/// thread. Returns nil, so `*con_cls` starts empty.
let rawTargetCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = { _, uri, connection in
    guard let uri, let connection, let raw = sheetd_socket_context(connection) else { return nil }
    let state = Unmanaged<ConnectionState>.fromOpaque(raw).takeUnretainedValue()
    let target = String(cString: uri)
    state.rawTarget = target
    state.headPending = true
    return nil
}

/// The header fields of a request as libmicrohttpd parsed them, with the first one the server
/// refuses, the first one that hid a NUL (see `NULCheck`), and the fields that frame the request.
struct HeaderCollection {
    var headers = HTTPHeaders()
    var refusal: HTTPRejection?
    var nul = NULCheck()
    var framing = FramingFields()
}

/// The fields that decide where the request's body ends (Content-Length, Transfer-Encoding) and
/// whether its head stands (Host), counted as the fields are collected: every request asks about
/// them, and asked afterwards each question was a scan of all the fields.
struct FramingFields: Equatable {
    var hostFields = 0
    var contentLengthFields = 0
    var transferEncodingFields = 0
    /// The first Content-Length's value (`parseContentLength`): nil without one, or when it does
    /// not read as a number.
    var contentLength: Int?

    /// Where the body ends is ambiguous: Content-Length twice, or beside Transfer-Encoding.
    var ambiguousLength: Bool {
        contentLengthFields > 1 || (contentLengthFields == 1 && transferEncodingFields > 0)
    }

    /// The next field; names compare case-insensitively, after their lengths.
    mutating func note(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        switch name.count {
        case 4 where Self.name(name, is: "host"):
            hostFields += 1
        case 14 where Self.name(name, is: "content-length"):
            if contentLengthFields == 0 { contentLength = parseContentLength(value) }
            contentLengthFields += 1
        case 17 where Self.name(name, is: "transfer-encoding"):
            transferEncodingFields += 1
        default:
            break
        }
    }

    private static func name(_ name: UnsafeRawBufferPointer, is lowercased: StaticString) -> Bool {
        String.asciiCaseInsensitiveEquals(name.assumingMemoryBound(to: UInt8.self),
                                          UnsafeBufferPointer(start: lowercased.utf8Start, count: lowercased.utf8CodeUnitCount))
    }
}

private let collectHeadersCallback: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
    guard let cls else { return MHD_Result.NO }
    let collection = cls.assumingMemoryBound(to: HeaderCollection.self)
    let nameBytes = UnsafeRawBufferPointer(start: key, count: key == nil ? 0 : keySize)
    let valueBytes = UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : valueSize)
    if collection.pointee.refusal == nil {
        if nameBytes.isEmpty || !isToken(nameBytes) {
            collection.pointee.refusal = .invalidHeader(name: String(decoding: nameBytes, as: UTF8.self), problem: .invalidName)
        } else if !isFieldValue(valueBytes) {
            collection.pointee.refusal = .invalidHeader(name: String(decoding: nameBytes, as: UTF8.self), problem: .controlCharacterInValue)
        }
    }
    collection.pointee.nul.field(name: nameBytes, value: valueBytes, index: collection.pointee.headers.count)
    collection.pointee.framing.note(name: nameBytes, value: valueBytes)
    collection.pointee.headers.append(name: nameBytes, value: valueBytes)
    return MHD_Result.YES
}

/// No whitespace or control character in a field name. Checked a word at a time: a loop over
/// the bytes spent eight instructions on each, on every field of every request.
func isToken(_ bytes: UnsafeRawBufferPointer) -> Bool {
    !ByteWord.anyWord(of: bytes) { ByteWord.hasByte(below: 0x21, in: $0) || ByteWord.hasByte(0x7F, in: $0) }
}

/// No control character but a tab in a field value. A value whose words show a byte below 0x20
/// is looked at byte by byte, since that byte may be a tab.
func isFieldValue(_ bytes: UnsafeRawBufferPointer) -> Bool {
    if !ByteWord.anyWord(of: bytes, { ByteWord.hasByte(below: 0x20, in: $0) || ByteWord.hasByte(0x7F, in: $0) }) { return true }
    for byte in bytes where (byte < 0x20 && byte != 0x09) || byte == 0x7F { return false }
    return true
}

/// Questions about the eight bytes of a word at once (the bit tricks of "Bit Twiddling Hacks":
/// exact as yes-or-no answers, whatever the other bytes hold).
enum ByteWord {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether some byte is below `bound` (at most 0x80).
    @inline(__always)
    static func hasByte(below bound: UInt8, in word: UInt64) -> Bool {
        (word &- ones &* UInt64(bound)) & ~word & highBits != 0
    }

    /// Whether some byte equals `byte`.
    @inline(__always)
    static func hasByte(_ byte: UInt8, in word: UInt64) -> Bool {
        let matches = word ^ (ones &* UInt64(byte))
        return (matches &- ones) & ~matches & highBits != 0
    }

    /// Whether `isFound` holds for some word covering `bytes`: every byte is in at least one
    /// word, and only bytes of `bytes` are read. Words overlap where the count is not a multiple
    /// of eight; under eight bytes, two 4-byte halves overlap, and under four the bytes missing
    /// are "A" (which no question here looks for).
    @inline(__always)
    static func anyWord(of bytes: UnsafeRawBufferPointer, _ isFound: (UInt64) -> Bool) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let count = bytes.count
        if count >= 8 {
            var offset = 0
            while offset + 8 < count {
                if isFound(base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) { return true }
                offset += 8
            }
            return isFound(base.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
        }
        if count >= 4 {
            let low = UInt64(base.loadUnaligned(as: UInt32.self))
            let high = UInt64(base.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
            return isFound(low | high << 32)
        }
        var word = ones &* UInt64(UInt8(ascii: "A"))
        for index in 0..<count {
            let shift = UInt64(8 * index)
            word = word & ~(0xFF << shift) | UInt64(bytes[index]) << shift
        }
        return isFound(word)
    }
}

/// libmicrohttpd 0.9.75 measures names and values with strlen, so "X: a\0b" arrives as "a". It
/// parses the head in place in its read buffer, which starts at the method and ends after the
/// empty line (`headEnd`), replacing each colon and line end with NUL: a value is followed by
/// its line end (one or two NULs), then by the next name, or for the last one by the empty
/// line's end (one or two NULs more). A byte other than NUL there, or more NULs than line ends
/// take, or anything but blanks between a name's colon and its value, is what followed a NUL
/// the client sent. Only bytes of the head are read: between two fields' pointers, or between
/// the last value and `headEnd`. (A value that ends in one NUL before a bare LF and a CRLF
/// looks like one that ends in CRLF CRLF and passes.) Checked field by field as they are
/// collected, so no list of the fields' places is kept.
struct NULCheck {
    /// The index of the first field found hiding a NUL.
    private(set) var firstFound: Int?
    /// Where the previous field's value ends, and its index.
    private var previousValueEnd: UnsafeRawPointer?
    private var previousIndex = 0

    /// The next field, in the order libmicrohttpd parsed them.
    mutating func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, index: Int) {
        guard firstFound == nil else { return }
        if let previousValueEnd, !gapIsLineEnd(from: previousValueEnd, to: name.baseAddress, isLast: false) {
            firstFound = previousIndex
            return
        }
        previousValueEnd = nil
        guard let nameStart = name.baseAddress, let valueStart = value.baseAddress else { return }
        let nameEnd = nameStart + name.count
        if valueStart > nameEnd && valueStart - nameEnd < 4096 {
            let gap = UnsafeRawBufferPointer(start: nameEnd + 1, count: valueStart - nameEnd - 1)
            if nameEnd.load(as: UInt8.self) != 0 || gap.contains(where: { $0 != 0x20 && $0 != 0x09 }) {
                firstFound = index
                return
            }
        }
        previousValueEnd = valueStart + value.count
        previousIndex = index
    }

    /// After the last field: its line end and the empty line, up to `headEnd`.
    mutating func end(headEnd: UnsafeRawPointer?) {
        guard firstFound == nil, let previousValueEnd else { return }
        if !gapIsLineEnd(from: previousValueEnd, to: headEnd, isLast: true) { firstFound = previousIndex }
    }

    private func gapIsLineEnd(from valueEnd: UnsafeRawPointer, to next: UnsafeRawPointer?, isLast: Bool) -> Bool {
        guard let next, next > valueEnd, next - valueEnd < 4096 else { return true }
        let gap = UnsafeRawBufferPointer(start: valueEnd, count: next - valueEnd)
        return gap.count <= (isLast ? 4 : 2) && !gap.contains(where: { $0 != 0 })
    }
}

extension ServerCore {
    /// The header fields libmicrohttpd parsed so far, with the first one to refuse.
    func collectHeaders(_ connection: OpaquePointer) -> HeaderCollection {
        var collection = HeaderCollection()
        collection.headers.reserveCapacity(bytes: 512)
        withUnsafeMutablePointer(to: &collection) { pointer in
            _ = MHD_get_connection_values_n(connection, MHD_ValueKind.HEADER_KIND, collectHeadersCallback, pointer)
        }
        return collection
    }

    /// The request's head, the reason to refuse it at once if there is one, and its framing fields.
    func readHead(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?, connectionState: ConnectionState?
    ) -> (head: HTTPRequestHead, refusal: HTTPRejection?, framing: FramingFields) {
        var collection = collectHeaders(connection)
        let target: RequestTarget
        if let raw = connectionState?.rawTarget {
            connectionState?.rawTarget = nil
            target = RequestTarget(raw: raw)
        } else {
            target = RequestTarget(raw: url.map { String(cString: $0) } ?? "/")
        }
        let head = HTTPRequestHead(
            method: method.map(HTTPMethod.init(cString:)) ?? HTTPMethod(rawValue: ""),
            path: target.path,
            query: target.query,
            headers: collection.headers,
            clientAddress: connectionState?.clientAddress ?? clientAddress(of: connection)
        )
        let framing = collection.framing
        if let refusal = collection.refusal { return (head, refusal, framing) }
        let headSize = sheetd_request_head_size(connection)
        let headEnd = method.flatMap { headSize > 0 ? UnsafeRawPointer($0) + headSize : nil }
        collection.nul.end(headEnd: headEnd)
        if let index = collection.nul.firstFound {
            return (head, .invalidHeader(name: head.headers.name(at: index), problem: .controlCharacterInValue), framing)
        }
        // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host.
        if let version, strcmp(version, "HTTP/1.1") == 0 {
            switch framing.hostFields {
            case 0: return (head, .invalidHeader(name: "Host", problem: .missing), framing)
            case 1: break
            default: return (head, .invalidHeader(name: "Host", problem: .repeated), framing)
            }
        }
        return (head, nil, framing)
    }
}

extension HTTPMethod {
    /// The method libmicrohttpd read. The common ones are compared, not decoded: a String made
    /// from a C string checks its UTF-8 first, on every request.
    init(cString: UnsafePointer<CChar>) {
        if strcmp(cString, "POST") == 0 {
            self = .post
        } else if strcmp(cString, "GET") == 0 {
            self = .get
        } else {
            self.init(rawValue: String(cString: cString))
        }
    }
}

/// The peer's address as text, without the port ("" if unknown).
func clientAddress(of connection: OpaquePointer) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> String in
        guard let base = buffer.baseAddress, sheetd_client_address(connection, base, 64) > 0 else { return "" }
        return String(cString: base)
    }
}

/// Content-Length as libmicrohttpd accepted it (it refuses malformed ones itself with 400).
/// Values too large for Int count as "too large" (Int.max).
func parseContentLength(_ bytes: some Sequence<UInt8>) -> Int? {
    var value = 0
    var sawDigit = false
    for byte in bytes {
        if byte == 0x20 || byte == 0x09 { if sawDigit { break } else { continue } }
        guard byte >= 0x30 && byte <= 0x39 else { return nil }
        sawDigit = true
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (a, o2) = m.addingReportingOverflow(Int(byte - 0x30))
        if o1 || o2 { return Int.max }
        value = a
    }
    return sawDigit ? value : nil
}
