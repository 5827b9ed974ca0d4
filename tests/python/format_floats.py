"""Formats floats in bulk with prometheus_client's own floatToGoString and
with Python's repr (which prometheus_client prints exemplar timestamps with).

usage: format_floats.py IN OUT

IN: one value per line, as the hex of its 8 little-endian bytes (so every bit
pattern arrives exactly). OUT: `floatToGoString(value) repr(value)`, one
value per line.
"""

import struct
import sys

from prometheus_client.utils import floatToGoString


def main():
    src, dst = sys.argv[1], sys.argv[2]
    unpack = struct.Struct('<d').unpack
    with open(src, 'r', encoding='ascii') as f:
        lines = f.read().split()
    values = [unpack(bytes.fromhex(line))[0] for line in lines]
    out = [f'{floatToGoString(v)} {v!r}' for v in values]
    with open(dst, 'w', encoding='ascii', newline='\n') as f:
        f.write('\n'.join(out))
        f.write('\n')


if __name__ == '__main__':
    main()
