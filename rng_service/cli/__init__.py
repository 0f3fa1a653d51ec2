"""The ``fairshoe`` command: argument parsing and handlers only, heavy imports inside them."""
