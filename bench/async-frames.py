#!/usr/bin/env python3
"""Async frame sizes of a Swift binary's async functions, largest first.

Every async function has an AsyncFunctionPointer record (symbol suffix "Tu"): a relative
offset to the function and the size of the context (frame) its caller allocates for it from
the task's allocator. A frame that does not fit the task's current slab costs a malloc, and one
of 1 KiB or more skips glibc's thread cache, so the request path's frames are worth watching:

    bench/async-frames.py .build/release/sheetd [FILTER] [COUNT]

FILTER keeps names (demangled) containing it; COUNT (40) limits the list.
"""
import struct
import subprocess
import sys


def sections(binary):
    out = subprocess.run(["objdump", "-h", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0].isdigit():
            found.append((int(parts[3], 16), int(parts[2], 16), int(parts[5], 16)))  # vma, size, file offset
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    wanted = sys.argv[2] if len(sys.argv) > 2 else ""
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    data = open(binary, "rb").read()
    secs = sections(binary)
    records = []
    for line in subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) != 3 or not parts[2].endswith("Tu"):
            continue
        address = int(parts[0], 16)
        for vma, size, offset in secs:
            if vma <= address < vma + size:
                start = offset + address - vma
                _, context_size = struct.unpack("<iI", data[start:start + 8])
                records.append((context_size, parts[2]))
                break
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(m for _, m in records),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [(size, name.replace("async function pointer to ", "")) for (size, _), name in zip(records, names)]
    rows = [r for r in rows if wanted in r[1]]
    for size, name in sorted(rows, reverse=True)[:count]:
        print(f"{size:6d}  {name[:160]}")


if __name__ == "__main__":
    main()
