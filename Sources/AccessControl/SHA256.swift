import CGnuTLS

/// SHA-256 of a byte string, computed by GnuTLS. Used to turn a presented API key into the digest
/// the keys file lists: the file never holds a key, and the server never keeps one in memory.
public enum SHA256 {
    public static let digestLength = 32

    public static func digest(_ message: some Sequence<UInt8>) -> [UInt8] {
        let bytes = Array(message)
        return [UInt8](unsafeUninitializedCapacity: digestLength) { digest, count in
            let status = bytes.withUnsafeBytes { input in
                gnutls_hash_fast(GNUTLS_DIG_SHA256, input.baseAddress, input.count, digest.baseAddress)
            }
            // Fails only if GnuTLS lacks SHA-256 or cannot allocate: nothing a caller could recover from.
            precondition(status == GNUTLS_E_SUCCESS, "gnutls_hash_fast(SHA-256) failed: \(status)")
            count = digestLength
        }
    }
}
