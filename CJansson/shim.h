#ifndef SHEETD_CJANSSON_SHIM_H
#define SHEETD_CJANSSON_SHIM_H
#include <jansson.h>

/* json_decref is a static inline that Swift imports; these wrap the macros Swift does not. */
static inline int sheetd_json_is_integer(const json_t *j) { return json_is_integer(j); }
static inline int sheetd_json_is_real(const json_t *j) { return json_is_real(j); }
#endif
