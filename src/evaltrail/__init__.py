"""evaltrail: holistic LM evaluation as a data-versioned, traceable DVC pipeline."""

__version__ = "0.1.0"
