"""Figures the command line's help texts quote, without importing the modules that define them.

Those modules load cryptography (the DRBG under ``rng_service.rng.shoe``, the signer under
``rng_service.records.schema``), and ``fairshoe --help`` must not. Each figure names its defining
module; ``tests/cli/test_cli_imports.py`` checks that they agree. Handlers validate and run with
the defining modules' own values, never with these.
"""

from __future__ import annotations

from typing import Final

#: ``rng_service.rng.shoe.SEED_BYTES``: a server seed (entropy input, then nonce)
SEED_BYTES: Final = 48
#: ``rng_service.records.schema.INSURANCE_RATE``: insurance offers ``collect rounds`` accepts
INSURANCE_RATE: Final = 0.25
#: ``rng_service.log.DEFAULT_ORIGIN``: the base origin of the operators' transparency logs
LOG_ORIGIN: Final = "fairshoe.example/log"
