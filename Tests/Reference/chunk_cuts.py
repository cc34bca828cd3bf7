#!/usr/bin/env python3
"""Content-defined chunk cuts of a file, computed from the description in
Docs/OnDiskFormat.md ("Chunk manifests"), independently of the Swift code.

Usage: chunk_cuts.py FILE -- prints the length of each chunk, one a line.
"""
import sys

MASK64 = (1 << 64) - 1
MINIMUM, AVERAGE, MAXIMUM = 16 << 10, 64 << 10, 256 << 10


def top_bits(n):
    return MASK64 ^ (MASK64 >> n)


SMALL_MASK, LARGE_MASK = top_bits(18), top_bits(14)


def gear_table():
    state, table = 0x74726F7665636463, []
    for _ in range(256):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        table.append(z ^ (z >> 31))
    return table


def chunk_lengths(data):
    gear, lengths, start = gear_table(), [], 0
    while start < len(data):
        end = min(len(data), start + MAXIMUM)
        cut, fp, i = end, 0, start + MINIMUM
        while i < end:
            fp = ((fp << 1) + gear[data[i]]) & MASK64
            i += 1
            mask = SMALL_MASK if i - start <= AVERAGE else LARGE_MASK
            if fp & mask == 0:
                cut = i
                break
        lengths.append(cut - start)
        start = cut
    return lengths


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        for length in chunk_lengths(f.read()):
            print(length)
