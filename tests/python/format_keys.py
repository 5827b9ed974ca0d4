"""Encodes keys in bulk with prometheus_client's own mmap_key (json.dumps(...,
sort_keys=True)), one output line per input line.

usage: format_keys.py IN OUT

IN: JSON lines [family, sample, [[name, value], ...], help]. Names and values
go to mmap_key as two lists, so a repeated name keeps its last value, as when
a Python dict is built from them.
"""

import json
import sys

from prometheus_client.mmap_dict import mmap_key


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, 'rb') as f:
        lines = f.read().split(b'\n')
    out = []
    for line in lines:
        if not line:
            continue
        family, sample, labels, help_text = json.loads(line)
        names = [name for name, _ in labels]
        values = [value for _, value in labels]
        key = mmap_key(family, sample, names, values, help_text)
        # ensure_ascii keeps keys on one line; say so loudly if that ever changes.
        if '\n' in key or not key.isascii():
            sys.exit(f'non-ASCII or multi-line key: {key!r}')
        out.append(key)
    with open(dst, 'w', encoding='ascii', newline='\n') as f:
        f.write('\n'.join(out))
        f.write('\n')


if __name__ == '__main__':
    main()
