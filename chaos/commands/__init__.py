"""Subcommands of the ``chaos`` CLI, one module each."""
