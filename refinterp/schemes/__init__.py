"""Schemes: which arithmetic each node uses.  See ``refinterp/schemes/loader.py`` for the file format."""
from .loader import (NodeChoice, Scheme, deep_merge, find_scheme_file, list_schemes, load_scheme, scheme_dirs,
                     scheme_documents)

__all__ = ["NodeChoice", "Scheme", "deep_merge", "find_scheme_file", "list_schemes", "load_scheme", "scheme_dirs",
           "scheme_documents"]
