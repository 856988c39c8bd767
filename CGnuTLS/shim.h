/*
 * CGnuTLS: the GnuTLS client calls `sheetd --check https://...` makes, and the SHA-256 of API
 * keys (AccessControl). libmicrohttpd already links GnuTLS for serving HTTPS, so the binary needs
 * no further library.
 */
#ifndef SHEETD_CGNUTLS_SHIM_H
#define SHEETD_CGNUTLS_SHIM_H

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>

/* GNUTLS_E_AGAIN / GNUTLS_E_INTERRUPTED, which Swift imports as plain macros only sometimes. */
static inline int sheetd_gnutls_is_retryable(int code) {
    return code == GNUTLS_E_AGAIN || code == GNUTLS_E_INTERRUPTED;
}

/* gnutls_free is a global function pointer, which Swift 6 refuses to read from any thread. */
static inline void sheetd_gnutls_free(void *pointer) {
    gnutls_free(pointer);
}

#endif /* SHEETD_CGNUTLS_SHIM_H */
