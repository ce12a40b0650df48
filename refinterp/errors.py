"""One error hierarchy.  The CLI prints ``str(err)`` on one line and exits 2."""
from __future__ import annotations

import tokenize
import zipfile
from contextlib import contextmanager
from typing import Iterator


class RefinterpError(Exception):
    """Base class.  ``where`` names the file (and optionally a location inside it)."""

    def __init__(self, message: str, where: str | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ModelError(RefinterpError):
    """The model file is unreadable, malformed or not a model."""


class UnsupportedOpError(ModelError):
    """An op (or an op variant) that no registered kernel implements."""


class InputError(RefinterpError):
    """A missing, unknown or mis-shaped input feed."""


class SchemeError(RefinterpError):
    """A scheme file that does not validate, or an unknown scheme name."""


class DumpError(RefinterpError):
    """A device dump (or its manifest) that cannot be read or aligned."""


class GoldenError(RefinterpError):
    """A golden case folder that is malformed."""


class OutputError(RefinterpError):
    """Refusing to write: the destination exists and would be overwritten."""


class ResourceError(RefinterpError):
    """A tensor or file would exceed the memory budget."""


# What NumPy, zipfile, json and our own field conversions raise on a malformed file (as opposed to a
# bug): readers turn these into their own RefinterpError at their public entry point.
MALFORMED_DATA = (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, EOFError,
                  NotImplementedError, RuntimeError, UnicodeError, OSError, zipfile.BadZipFile,
                  tokenize.TokenError)


@contextmanager
def malformed_as(cls: type[RefinterpError], what: str, where: str) -> Iterator[None]:
    """Inside a reader's entry point: malformed data becomes ``cls`` (one line naming ``where``),
    exhaustion becomes ResourceError; RefinterpErrors pass unchanged."""
    try:
        yield
    except RefinterpError:
        raise
    except MemoryError:
        raise ResourceError(f"the {what} needs more memory than is available", where) from None
    except MALFORMED_DATA as e:
        raise cls(f"malformed {what} ({type(e).__name__}: {e})", where) from None
