"""TFLite Micro's signal library (audio front end) custom ops."""
from . import frontend  # noqa: F401
