"""``multiprom.MultiProcessValue``: ``prometheus_client``'s multiprocess
value class on multiprom's Rust writer.

Same files, same bytes, same behaviour as
``prometheus_client.values.MultiProcessValue``'s class; updates go
straight to each value's slot in the memory-mapped file, without a
process-wide lock and, with the default ``os.getpid``, without calling
Python to notice a fork.
"""

import os
import warnings

from multiprom import _native


def MultiProcessValue(process_identifier=os.getpid):
    """Returns a value class writing ``prometheus_client``'s multiprocess
    files through multiprom, like
    ``prometheus_client.values.MultiProcessValue(process_identifier)``.

    ``process_identifier`` must return distinct values in processes that
    run at the same time; it is called now and, as in Python, before every
    operation (``os.getpid``, the default, only after a fork). When it
    returns something else, every value made so far is re-created in the
    new identifier's files.
    """
    from prometheus_client import values as python_values

    files = _native.ValueFiles(process_identifier, process_identifier is os.getpid)
    # What close_all_multiprocess_files() closes (prometheus_client 0.26
    # and later; before, only the class's close_all_files()).
    cleanups = getattr(python_values, "_multi_process_cleanups", None)
    if cleanups is not None:
        cleanups.append(files.close_all)

    class MmapedValue(_native.Value):
        """A float backed by a per-process memory-mapped file, written by
        multiprom."""

        _multiprocess = True
        # What native histogram files are named with (_native_observe.file_id).
        _multiprom_process_identifier = process_identifier

        def __new__(cls, typ, metric_name, name, labelnames, labelvalues, help_text,
                    multiprocess_mode='', **kwargs):
            # As prometheus_client's class does (its deprecated name).
            if 'prometheus_multiproc_dir' in os.environ and 'PROMETHEUS_MULTIPROC_DIR' not in os.environ:
                os.environ['PROMETHEUS_MULTIPROC_DIR'] = os.environ['prometheus_multiproc_dir']
                warnings.warn("prometheus_multiproc_dir variable has been deprecated in favor of the upper case naming PROMETHEUS_MULTIPROC_DIR", DeprecationWarning)
            try:
                return super().__new__(cls, files, typ, metric_name, name, labelnames,
                                       labelvalues, help_text, multiprocess_mode)
            except UnicodeEncodeError:
                # A name, label or help with a lone surrogate (text decoded with
                # 'surrogateescape'): no UTF-8 for the engine, but the key is
                # prometheus_client's, whose json.dumps escapes it.
                from prometheus_client.mmap_dict import mmap_key
                key = mmap_key(metric_name, name, labelnames, labelvalues, help_text)
                return super().__new__(cls, files, typ, '', '', (), (), '', multiprocess_mode,
                                       key=key)

        @classmethod
        def close_all_files(cls):
            files.close_all()

    return MmapedValue
