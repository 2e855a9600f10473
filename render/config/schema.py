"""The configuration's schema: the :class:`Config` of one render and :data:`SCHEMA`, its keys.

A Config holds the top-level keys below, the core sections (``render.options``) and every
processor's own section, declared beside the processor (``render.processors``) and composed here
from the registry. :data:`SCHEMA` flattens them into dotted keys (``detect.size``), the names
that profiles, the command line, reports and docs/configuration.md use; it follows the registry,
so a processor registered at run time brings its keys with it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, get_type_hints

from ..options import (KEYED, Debug, Decode, Detect, Embed, Encode, Execution, Landmark, Lock,
                       Mark, Mask, Models, Review, Segment, Select, Shard, Stabilize, option)
from ..processors import registry


def processor_sections(flat: Mapping[str, Any], build: Any = None) -> dict[str, Any]:
    """Every registered processor's section, its keys taken from ``flat`` (dotted) over the
    declared defaults."""
    build = build or (lambda cls, flat, prefix: cls())
    return {p.name: build(p.options, flat, p.name + ".") for p in registry.processors()}


@dataclass(frozen=True)
class Config:
    profile: str = option("moderate", "profile name (profiles/NAME.yaml), a path to a YAML file, "
                          "or auto (low/moderate/high by the GPU's memory; low on the CPU without "
                          "one)", keyed="never")
    source: str = option("", "image with the source face, several separated by commas or a "
                         "folder of them (their mean identity; default: input_dir/source.jpg|png)",
                         keyed="never")
    target: str = option("", "video or image to render (default: every video and image in "
                         "input_dir)", keyed="never")
    output: str = option("", "output file (default: output_dir/<target name>)", keyed="never")
    input_dir: str = option("", "folder rendered when no target is given", env="RENDER_INPUT_DIR",
                            keyed="never")
    output_dir: str = option("", "folder for outputs when no output is given",
                             env="RENDER_OUTPUT_DIR", keyed="never")
    cache_dir: str = option("", "cache folder: source embeddings, TensorRT engines, "
                            "verified-stamps (default: $RENDER_CACHE_DIR or ~/.cache/render)",
                            env="RENDER_CACHE_DIR", keyed="never")
    preview: bool = option(False, "render a quick preview at preview_height")
    preview_height: int = option(720, "output height when preview=true", min=64, max=4320,
                                 multiple=2)
    trim: str = option("", "render only START-END: seconds (12.5-20) or frames with an f "
                       "(300f-500f)")
    progress: str = option("auto", "progress display", choices=("auto", "bar", "lines", "off"),
                           keyed="never")
    lock_dir: str = option("", "folder of the device locks, shared by every render on this "
                           "machine (default: cache_dir/locks)", env="RENDER_LOCK_DIR",
                           keyed="never")
    spool_dir: str = option("", "job spool of render submit / render work (default: "
                            "cache_dir/jobs)", env="RENDER_SPOOL_DIR", keyed="never")
    state_dir: str = option("", "the web page's accounts, sessions and uploads (default: "
                            "cache_dir/web)", env="RENDER_STATE_DIR", keyed="never")
    skip_done: bool = option(True, "skip a target whose output is complete and whose report has "
                             "this render's job key (idempotent re-runs)", keyed="never")
    allow_partial: bool = option(False, "render the readable part of a truncated target instead "
                                 "of failing (the output is shorter, and says so)", keyed="never")
    source_face: int = option(0, "which face of the source image to use when it has several: 0 = "
                              "the largest, 1 = the next largest, ...", min=0, max=64)
    processors: tuple[str, ...] = option(["swap", "enhance"], "the chain's steps, in order: a "
                                         "processor's section (swap, enhance, ...; one with "
                                         "enabled=false is skipped) or a model's manifest name",
                                         keyed="unless-default")
    models: Models = field(default_factory=Models)
    detect: Detect = field(default_factory=Detect)
    embed: Embed = field(default_factory=Embed)
    #: the processors' own sections (``swap``, ``enhance``, ...), read as attributes:
    #: ``cfg.swap.weight``; their keys stand here in the schema's order
    steps: Mapping[str, Any] = field(default_factory=lambda: processor_sections({}),
                                     metadata={"processors": True})
    mask: Mask = field(default_factory=Mask)
    landmark: Landmark = field(default_factory=Landmark)
    select: Select = field(default_factory=Select)
    stabilize: Stabilize = field(default_factory=Stabilize)
    debug: Debug = field(default_factory=Debug)
    review: Review = field(default_factory=Review)
    execution: Execution = field(default_factory=Execution)
    encode: Encode = field(default_factory=Encode)
    decode: Decode = field(default_factory=Decode)
    segment: Segment = field(default_factory=Segment)
    mark: Mark = field(default_factory=Mark)
    lock: Lock = field(default_factory=Lock)
    shard: Shard = field(default_factory=Shard)
    #: the keys given on the command line (not a key itself): a forced value is an error where a
    #: profile's value would be adapted (e.g. the codec of a .webm output)
    explicit: frozenset = field(default=frozenset(), metadata={"internal": True})

    def __getattr__(self, name: str) -> Any:
        """A processor's section: ``cfg.swap``."""
        steps = self.__dict__.get("steps") or {}
        if name in steps:
            return steps[name]
        raise AttributeError(f"Config has no key or section {name!r}")

    # -- derived views -------------------------------------------------------------------------
    @property
    def models_dir(self) -> Path:
        return Path(self.models.dir).expanduser() if self.models.dir else \
            Path("~/.cache/render/models").expanduser()

    @property
    def marked(self) -> bool:
        """Outputs carry the synthetic-media marks: ``mark.enabled``, unless ``debug.overlay``
        drew the faces instead of swapping them (nothing synthetic to declare)."""
        return self.mark.enabled and not self.debug.overlay

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else \
            Path("~/.cache/render").expanduser()

    @property
    def lock_path(self) -> Path:
        return Path(self.lock_dir).expanduser() if self.lock_dir else self.cache_path / "locks"

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).expanduser() if self.state_dir else self.cache_path / "web"

    @property
    def spool_path(self) -> Path:
        return Path(self.spool_dir).expanduser() if self.spool_dir else self.cache_path / "jobs"

    def get(self, key: str) -> Any:
        node: Any = self
        for part in key.split("."):
            node = getattr(node, part)
        return node


@dataclass(frozen=True)
class Key:
    """One leaf of the schema."""

    name: str           # dotted
    type: Any
    default: Any
    meta: Mapping[str, Any]
    #: the processor whose section holds it, where it is not a core key
    processor: str = ""

    def in_job_key(self, value: Any, chain: Sequence[str] = ()) -> bool:
        """Whether ``value`` of this key enters the job key (see KEYED). A key of a processor
        that does not ship with render enters it only where ``chain`` (``processors``) names
        the processor: installing a plug-in changes no other render's job key."""
        keyed = self.meta.get("keyed", "bytes")
        assert keyed in KEYED, keyed
        if self.processor and not registry.shipped(self.processor) and \
                self.processor not in chain:
            return False
        if keyed == "unless-default":
            default = list(self.default) if isinstance(self.default, tuple) else self.default
            return value != default
        return keyed == "bytes"


def _walk(cls: type, prefix: str = "", processor: str = "") -> list[Key]:
    hints = get_type_hints(cls)
    keys: list[Key] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("processors"):
            for p in registry.processors():
                keys.extend(_walk(p.options, p.name + ".", p.name))
            continue
        if f.metadata.get("internal"):
            continue
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            keys.extend(_walk(t, prefix + f.name + "."))
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            keys.append(Key(prefix + f.name, t, default, f.metadata, processor))
    return keys


class Schema(Mapping[str, Key]):
    """Dotted key → :class:`Key`, composed again when a processor is registered."""

    def __init__(self) -> None:
        self._keys: dict[str, Key] = {}
        self._generation = -1

    def _current(self) -> dict[str, Key]:
        if self._generation != registry.generation():
            self._keys = {k.name: k for k in _walk(Config)}
            self._generation = registry.generation()
        return self._keys

    def __getitem__(self, name: str) -> Key:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())


SCHEMA = Schema()
