"""The error tree (one root), configuration and JSON logs."""
