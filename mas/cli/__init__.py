"""The ``mas`` command.

Stage: none: the command line.
"""
