"""The ``fairshoe`` command: argument parsing and handlers only, heavy imports inside them."""

#: ``main`` is the console script's entry point; every other module is an internal of the command
__all__ = ["main"]
