"""What the tests share and are not tests themselves: fixtures' machinery (real server processes,
a PostgreSQL server, the reference wallet, a witness), builders of rounds, records and logs, and
the checks several tests make. Scripts run as processes (``stacked_serve.py``,
``ref_wallet_server.py``, ``witness_server.py``) live here too."""
