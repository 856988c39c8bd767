/*
 * CLibFuzzer: the one libFuzzer entry point sheetd-fuzz calls. Declaration only: the definition
 * comes from the toolchain's libFuzzer runtime, linked by `-sanitize=fuzzer` (.ci/fuzz). The
 * ordinary build never calls it, so it links without libFuzzer.
 *
 * SwiftPM gives every executable its own `main` (the module's @main), so libFuzzer's `main` is
 * never linked; LLVMFuzzerRunDriver is libFuzzer's documented way in for a program that owns main.
 */
#ifndef SHEETD_CLIBFUZZER_SHIM_H
#define SHEETD_CLIBFUZZER_SHIM_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv,
                        int (*user_callback)(const uint8_t *data, size_t size));

#endif /* SHEETD_CLIBFUZZER_SHIM_H */
