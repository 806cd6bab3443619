"""Subcommands of `circuitdev`: one module each, discovered by `circuitdev.cli`. Keep them thin."""
