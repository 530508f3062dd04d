"""serQ: a verification-first toolchain for LLM-serving deployments."""

__version__ = "0.1.0"
