"""Model files: the pinned manifest, the verified store, fetching and fp16 conversion.

The renderer uses :func:`load_manifest`, :meth:`Manifest.resolve` and :meth:`ModelStore.verify`
(never downloads); ``render models ...`` is :func:`render.models.commands.main`.
"""
from .manifest import Manifest, ModelEntry, load_manifest
from .store import ModelStore, default_stamp_dir

__all__ = ["Manifest", "ModelEntry", "ModelStore", "default_stamp_dir", "load_manifest"]
