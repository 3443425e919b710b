"""The ``mas`` command."""
