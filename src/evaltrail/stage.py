"""What every stage shares: argument count check, one-line errors, non-zero exit."""

from __future__ import annotations

import sys
from typing import Callable

from .errors import EvaltrailError


def run_stage(main: Callable[..., None], usage: str) -> None:
    """Call main(*argv); an EvaltrailError prints as `error: ...` and exits 1."""
    argv = sys.argv[1:]
    if len(argv) != usage.count("<"):
        print(f"usage: {usage}", file=sys.stderr)
        sys.exit(2)
    try:
        main(*argv)
    except EvaltrailError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
