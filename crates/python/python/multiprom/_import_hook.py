"""Patch a module the moment it is imported, without importing it now.

``multiprom.install()`` must not import ``prometheus_client`` itself:
``prometheus_client.values`` decides once, when first imported, whether
``PROMETHEUS_MULTIPROC_DIR`` is set, and applications such as vLLM set it in
code before that import. So instead of importing the module, a finder on
``sys.meta_path`` wraps its loader: after the module's own code has run and
before anyone can import a name from it, the patch is applied.
"""

import importlib.abc
import importlib.machinery
import sys

from multiprom._warn import warn


def patch_on_import(name, patch):
    """Call ``patch(module)`` right after module ``name`` is first executed."""
    for finder in sys.meta_path:
        if isinstance(finder, _PatchingFinder) and finder.name == name:
            finder.patch = patch
            return
    sys.meta_path.insert(0, _PatchingFinder(name, patch))


class _PatchingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, name, patch):
        self.name = name
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        # The finder that would have found it: the path-based one (which also
        # covers zip files). Asking it directly avoids finding ourselves.
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, self.patch)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception as error:  # never break the application's import
            warn(f"multiprom: could not patch {module.__name__}: {error!r}")

    def __getattr__(self, attr):
        # get_source, get_filename, ... for tracebacks and tools.
        return getattr(self._loader, attr)
