"""Errors a user can act on. Each message names the problem and the fix; the CLI prints it without a traceback."""


class CircuitdevError(Exception):
    """Base class: anything the `circuitdev` command reports as a one-line message and a non-zero exit."""


class ConfigError(CircuitdevError, ValueError):
    """A parameter, panel file or configuration value is invalid."""


class DataError(CircuitdevError, ValueError):
    """An input file (published JSON, result record) is missing, malformed or partial."""


class ModelUnavailableError(CircuitdevError, OSError):
    """A model or revision cannot be loaded here (offline hub, missing folder)."""


class ArchitectureError(CircuitdevError, ValueError):
    """A model whose layout the adapter table does not know."""


class NumericalError(CircuitdevError, ArithmeticError):
    """NaN / Inf in probed values (e.g. fp16 underflow)."""
