/*
 * CSQLite: the system SQLite (Debian libsqlite3-dev) for Swift.
 *
 * SQLITE_TRANSIENT and SQLITE_STATIC are casts of integers to function pointers, which Swift
 * cannot import; these inline functions hand them over as values.
 */
#ifndef SHEETD_CSQLITE_SHIM_H
#define SHEETD_CSQLITE_SHIM_H

#include <sqlite3.h>

/* Tells sqlite3_bind_* to copy the bytes before returning: the Swift buffer may move after. */
static inline sqlite3_destructor_type sheetd_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/* Tells sqlite3_bind_* the bytes outlive the statement's next step (no copy). */
static inline sqlite3_destructor_type sheetd_sqlite_static(void) {
    return SQLITE_STATIC;
}

/* Turns off SQLite's memory statistics, which nothing reads: with them on, every allocation and
 * free inside SQLite takes a process-wide mutex (two dozen a stored session). Only takes effect
 * before SQLite initializes (the first open); SQLITE_MISUSE after. (sqlite3_config is variadic,
 * which Swift cannot call.) */
static inline int sheetd_sqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif /* SHEETD_CSQLITE_SHIM_H */
