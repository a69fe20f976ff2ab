"""The `irrun` command line.

`base` holds the command group, error handling and option helpers shared by
every command; each other module registers the commands of one capability
(`run`: infer; `check`: validate; `describe`: info, ops; `graph`: graph; `write`: extract;
`batch`: batch; `compare`: compare; `reduce`: reduce).  Importing this package registers them all.
"""
from .base import cli, main
from . import batch, check, compare, describe, graph, reduce, run, write  # noqa: F401  (they register their commands)

__all__ = ["cli", "main"]
