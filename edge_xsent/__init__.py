"""edge-xsent: lightweight cross-lingual sentence encoders, trained from parallel text, run on the edge."""

__version__ = "0.1.0"
__all__ = ["Encoder", "__version__"]


def __getattr__(name: str):
    # Imported lazily: `import edge_xsent` (and the CLI's --help) stays fast and torch-free.
    if name == "Encoder":
        from edge_xsent.encode.encoder import Encoder

        return Encoder
    raise AttributeError(f"module 'edge_xsent' has no attribute {name!r}")
