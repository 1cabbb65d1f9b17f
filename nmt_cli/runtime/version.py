"""nmt's version, in a module of its own so that any layer may name it (a package's card does)."""

__version__ = "0.1.0"
