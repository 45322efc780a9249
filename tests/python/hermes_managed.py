"""Prints what Hermes itself makes of a managed scope, as one JSON object.

Usage: python hermes_managed.py KEY...
The test sets HERMES_MANAGED_DIR (the directory holding the config.yaml fleetgate-controller
rendered) and HERMES_HOME (a home whose user config.yaml tries to override pinned keys).
Output: {"managed_dir", "managed_keys": [...], "effective": {KEY: value}, "is_managed": {KEY: bool}}
where each KEY is a dotted path read from hermes_cli.config.load_config().
"""
import json
import sys

from hermes_cli import managed_scope
from hermes_cli.config import load_config


def dotted(tree, key):
    value = tree
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


config = load_config()
keys = sys.argv[1:]
managed_dir = managed_scope.get_managed_dir()
print(json.dumps({
    "managed_dir": str(managed_dir) if managed_dir else None,
    "managed_keys": sorted(managed_scope.managed_config_keys()),
    "effective": {k: dotted(config, k) for k in keys},
    "is_managed": {k: managed_scope.is_key_managed(k) for k in keys},
}))
