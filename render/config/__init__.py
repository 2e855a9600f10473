"""Profiles + ``key=value`` overrides → one validated, immutable :class:`Config`.

- :mod:`.schema` — the Config: the top-level keys, the core sections and the processors' own
- :mod:`.validate` — a key's name and a value checked against the schema
- :mod:`.profiles` — the profile files (profiles/NAME.yaml or a path)
- :mod:`.load` — a Config built from the environment, a profile and command-line overrides
- :mod:`.trim` — the ``trim`` key's START-END
- :mod:`.help` — the keys as ``render --help`` lists them

Profile YAML files are nested mappings of the schema's shape; command-line overrides use dotted
keys (``detect.size=640``). Nothing here is module-level mutable state: :func:`load_config`
returns a fresh object that the caller passes down. The names below are the package's API.
"""
from .help import help_text
from .load import config_from_values, load_config, parse_overrides
from .profiles import (JOB_KEYS, PROFILES_DIR, PROJECT_ROOT, profile_names, profile_path,
                       read_profile)
from .schema import SCHEMA, Config, Key
from ..options import (KEYED, MEMORY_STRATEGIES, PRECISIONS, PROVIDERS, Decode, Detect, Embed,
                       Encode, Execution, Lock, Mark, Mask, Models, Segment, Select, Shard, option,
                       spec)
from .trim import Trim, parse_trim
from .validate import nearest_keys, unknown_key_message

__all__ = ["JOB_KEYS", "KEYED", "MEMORY_STRATEGIES", "PRECISIONS", "PROFILES_DIR", "PROJECT_ROOT",
           "PROVIDERS", "SCHEMA", "Config", "Decode", "Detect", "Embed", "Encode", "Execution",
           "Key", "Lock", "Mark", "Mask", "Models", "Segment", "Select", "Shard", "Trim",
           "config_from_values", "help_text", "load_config", "nearest_keys", "option",
           "parse_overrides", "parse_trim", "profile_names", "profile_path", "read_profile",
           "spec", "unknown_key_message"]
