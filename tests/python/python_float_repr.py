"""Writes Python's repr of many floats, one `<bits in hex> <repr>` a line:
the table `crates/collector/src/exposition/python_repr_table.txt` that the
collector's `write_python_repr` is checked against.

Usage: python3 tests/python/python_float_repr.py > crates/collector/src/exposition/python_repr_table.txt
"""

import random
import struct


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def main():
    rng = random.Random(20240607)
    values = [float("inf"), float("-inf"), 0.0, -0.0, 5e-324, 1.7976931348623157e308]
    for _ in range(1500):
        # Any bit pattern: every exponent, subnormals, inf and nan included.
        values.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
    for _ in range(1000):
        # Unix times as time.time() gives them.
        values.append(rng.uniform(0, 4e9))
    for _ in range(500):
        values.append(rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-30, 30))
    for e in range(-323, 308):
        for x in (10.0 ** e, 1.5 * 10.0 ** e, 9.999999999999999 * 10.0 ** e):
            values.append(x)
            values.append(-x)
    for x in values:
        if x != x:
            continue  # nan has many bit patterns; all print as 'nan'
        print(f"{bits(x):016x} {x!r}")


if __name__ == "__main__":
    main()
