"""The configuration: profiles + ``key=value`` overrides → one validated, immutable Config."""
from .schema import (JOB_KEYS, KEYED, MEMORY_STRATEGIES, PRECISIONS, PROFILES_DIR, PROJECT_ROOT,
                     PROVIDERS, SCHEMA, Config, Decode, Detect, Embed, Encode, Enhance, Execution,
                     Key, Lock, Mark, Mask, Models, Segment, Select, Shard, Swap, Trim,
                     config_from_values, help_text, load_config, nearest_keys, parse_overrides,
                     parse_trim, profile_models, profile_names, profile_path, read_profile,
                     required_models, spec, unknown_key_message)

__all__ = ["JOB_KEYS", "KEYED", "MEMORY_STRATEGIES", "PRECISIONS", "PROFILES_DIR", "PROJECT_ROOT",
           "PROVIDERS", "SCHEMA", "Config", "Decode", "Detect", "Embed", "Encode", "Enhance",
           "Execution", "Key", "Lock", "Mark", "Mask", "Models", "Segment", "Select", "Shard",
           "Swap", "Trim", "config_from_values", "help_text", "load_config", "nearest_keys",
           "parse_overrides", "parse_trim", "profile_models", "profile_names", "profile_path",
           "read_profile", "required_models", "spec", "unknown_key_message"]
