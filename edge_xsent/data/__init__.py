"""Parallel corpora: Debian-derived corpus building, cleaning, splitting and streaming readers."""

from edge_xsent.data.corpus import Pair, read_moses, read_pairs, read_tsv

__all__ = ["Pair", "read_moses", "read_pairs", "read_tsv"]
