"""The offline verifier of signed records: its checks and its report."""
