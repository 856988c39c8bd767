/*
 * CGnuTLS: the GnuTLS client calls `sheetd --check https://...` makes (libmicrohttpd already
 * links GnuTLS for serving HTTPS, so the binary needs no further library).
 */
#ifndef SHEETD_CGNUTLS_SHIM_H
#define SHEETD_CGNUTLS_SHIM_H

#include <gnutls/gnutls.h>

/* GNUTLS_E_AGAIN / GNUTLS_E_INTERRUPTED, which Swift imports as plain macros only sometimes. */
static inline int sheetd_gnutls_is_retryable(int code) {
    return code == GNUTLS_E_AGAIN || code == GNUTLS_E_INTERRUPTED;
}

#endif /* SHEETD_CGNUTLS_SHIM_H */
