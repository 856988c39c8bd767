/*
 * CLibPQ: the system libpq (Debian libpq-dev), PostgreSQL's client library, for Swift.
 * Only the PostgresStore target imports it.
 */
#ifndef SHEETD_CLIBPQ_SHIM_H
#define SHEETD_CLIBPQ_SHIM_H

#include <libpq-fe.h>

#endif /* SHEETD_CLIBPQ_SHIM_H */
