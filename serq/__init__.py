"""serQ: a verification-first toolchain for LLM-serving deployments."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `serq.link_file(path)`: the linker's entry, imported when first asked for (docs/api.md)
    if name == "link_file":
        from serq.link import link_file
        return link_file
    raise AttributeError(f"module 'serq' has no attribute {name!r}")
