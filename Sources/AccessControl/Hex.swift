import CGnuTLS

/// Lower-case hexadecimal, both ways, by GnuTLS (`gnutls_hex_encode2`, `gnutls_hex_decode2`).
public enum Hex {
    public static func encode(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        var bytes = bytes
        var text = gnutls_datum_t()
        let status = bytes.withUnsafeMutableBufferPointer { buffer in
            var input = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return gnutls_hex_encode2(&input, &text)
        }
        // Fails only when GnuTLS cannot allocate: nothing a caller could recover from.
        precondition(status == GNUTLS_E_SUCCESS, "gnutls_hex_encode2 failed: \(status)")
        defer { sheetd_gnutls_free(text.data) }
        return String(decoding: UnsafeBufferPointer(start: text.data, count: Int(text.size)), as: UTF8.self)
    }

    /// nil unless `text` is an even number of hex digits (either case), and nothing else.
    public static func decode(_ text: Substring) -> [UInt8]? {
        var digits = Array(text.utf8)
        guard !digits.isEmpty else { return [] }
        var bytes = gnutls_datum_t()
        let status = digits.withUnsafeMutableBufferPointer { buffer in
            var input = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return gnutls_hex_decode2(&input, &bytes)
        }
        guard status == GNUTLS_E_SUCCESS else { return nil }
        defer { sheetd_gnutls_free(bytes.data) }
        return Array(UnsafeBufferPointer(start: bytes.data, count: Int(bytes.size)))
    }
}
