"""Shared bits of the format interop helpers (tests/integration/format_interop.rs).

Values and timestamps travel as the hex of their 8 little-endian bytes, so
NaN, -0.0 and subnormals arrive bit for bit.
"""

import glob
import os
import struct

from prometheus_client.mmap_dict import MmapedDict

# Strings that stress key encoding: JSON escapes, controls, DEL, C1 controls,
# line separators, BOM, noncharacters, astral planes (surrogate pairs).
TRICKY = [
    '',
    'plain',
    'quote " backslash \\ slash / both \\"',
    'newline \n tab \t cr \r backspace \b formfeed \f',
    'controls ' + ''.join(chr(c) for c in range(0x20)),
    'DEL \x7f C1 \x80 \x9f NBSP \xa0',
    'U+2028 \u2028 U+2029 \u2029 BOM \ufeff U+FFFE \ufffe U+FFFF \uffff',
    'astral \U0001F600 \U0001D11E \U00020000 \U000E0001 \U0010FFFF',
    'mixed \u00fcn\u00efc\u00f8d\u00e9 \u65e5\u672c\u8a9e \u0627\u0644\u0639\u0631\u0628\u064a\u0629',
    '{"looks": ["like", "json"]}, \\u0041 not an escape',
]

TRICKY_HELP = (
    'Help with "quotes", \\backslashes\\, a newline\nand U+2028 \u2028, '
    'NUL \x00, DEL \x7f, emoji \U0001F600 and \U0001D11E'
)


def f64_hex(value):
    return struct.pack('<d', value).hex()


def dump_dir(path):
    """Every *.db file in `path` as Python's reader sees it."""
    files = {}
    for f in sorted(glob.glob(os.path.join(path, '*.db'))):
        entries = []
        for key, value, timestamp, pos in MmapedDict.read_all_values_from_file(f):
            entries.append([key, f64_hex(value), f64_hex(timestamp), pos])
        files[os.path.basename(f)] = {'size': os.path.getsize(f), 'entries': entries}
    return files
