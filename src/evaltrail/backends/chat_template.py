"""A weights file's chat template, rendered in a sandbox within a size and a time limit.

The template is data from a download (a GGUF's tokenizer.chat_template): one that renders for
ever, or builds a gigabyte string in one operation ('a' * 10**9, 'x'|center(10**9), '%9999999999s'),
stops with one line naming the model instead of hanging or exhausting memory. Within the limits
the output is what Jinja's ImmutableSandboxedEnvironment renders, byte for byte.
"""

from __future__ import annotations

import functools
import re
import sys
import time

from jinja2 import Environment
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import EvaltrailError

MAX_CHARS = 1_000_000
"""Characters one operation may make, and a rendering may add to its inputs' size (a template
wraps a prompt in a few hundred)."""

MAX_SECONDS = 5.0
"""Wall time of one rendering (a real template takes well under a millisecond)."""

_WIDE = re.compile(r"%[-+ #0-9.]*[0-9]{7}|\{[^{}]*:[^{}]*[0-9]{7}")  # a %/{:} width or precision >= MAX_CHARS


class _Limit(BaseException):
    """Raised inside a rendering; BaseException so no `except Exception` in Jinja swallows it."""


def _count(value) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_CHARS:
        raise _Limit(f"asked for an operation of size {value} (more than {MAX_CHARS})")


def _format(value) -> None:
    if isinstance(value, str) and _WIDE.search(value):
        raise _Limit(f"asked for a format width of {MAX_CHARS} characters or more")


def _bounded_filter(name: str, fn):
    @functools.wraps(fn)  # keeps Jinja's pass_context/pass_environment mark
    def checked(*args, **kwargs):
        i = 0  # the filtered value follows what Jinja passes first (context, environment)
        while i < len(args) and isinstance(args[i], (Context, EvalContext, Environment)):
            i += 1
        if name == "format" and i < len(args):
            _format(args[i])
        for value in (*args[i + 1 :], *kwargs.values()):  # its arguments: counts, widths
            _count(value)
        return fn(*args, **kwargs)

    return checked


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Refuses any one operation that would make more than MAX_CHARS: a repetition, a power, a
    format width, a count or width argument of a filter, method or global (center, ljust, lipsum)."""

    intercepted_binops = frozenset(["*", "**", "%"])

    def __init__(self, **options):
        super().__init__(**options)
        self.filters = {name: _bounded_filter(name, fn) for name, fn in self.filters.items()}

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_CHARS:
                    raise _Limit(f"asked for a sequence of {len(seq) * n} items (more than {MAX_CHARS})")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if right > 0 and right * max(abs(left), 1).bit_length() > 64 * 1024:
                raise _Limit("asked for a power of more than 64 kbit")
        elif operator == "%":
            _format(left)
        return super().call_binop(context, operator, left, right)

    def call(self, context, obj, /, *args, **kwargs):  # positional-only: any keyword goes to obj
        for value in (*args, *kwargs.values()):
            _count(value)
        return super().call(context, obj, *args, **kwargs)

    def getattr(self, obj, attribute):
        if attribute in ("format", "format_map"):
            _format(obj)
        return super().getattr(obj, attribute)


class BoundedTemplate:
    """A chat template compiled from `source`, whose render() stops past MAX_CHARS or MAX_SECONDS
    with an EvaltrailError starting with `where` (the config key)."""

    def __init__(self, source: str, where: str):
        self.where = where
        env = _BoundedSandbox(trim_blocks=True, lstrip_blocks=True)
        try:
            self.template = env.from_string(source)
        except _Limit as exc:  # constant folding runs the template's constant expressions now
            raise self._error(exc) from None

    def render(self, **context) -> str:
        budget = MAX_CHARS + 2 * _size(context)
        deadline = time.monotonic() + MAX_SECONDS
        out, size = [], 0
        try:
            with _Deadline(deadline):
                for chunk in self.template.generate(**context):
                    size += len(chunk)
                    if size > budget:
                        raise _Limit(f"made more than {budget} characters")
                    out.append(chunk)
        except _Limit as exc:
            raise self._error(exc) from None
        return "".join(out)

    def _error(self, exc: _Limit) -> EvaltrailError:
        return EvaltrailError(
            f"{self.where}: the GGUF's tokenizer.chat_template {exc.args[0]} rendering one prompt; "
            f"the template (data from the weights file) is broken or hostile: set chat_template: "
            f"false or use other weights"
        )


def _size(value) -> int:
    """Characters of the strings in a render context (the prompt), which the output may repeat."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value)
    return 0


class _Deadline:
    """Checks the clock at every line the template's compiled code runs (its frames' file name is
    <template>) and at every function call in between: a loop with nothing to intercept still stops."""

    def __init__(self, at: float):
        self.at = at

    def _trace(self, frame, event, arg):
        if time.monotonic() > self.at:
            raise _Limit(f"ran longer than {MAX_SECONDS:g} s")
        return self._trace if frame.f_code.co_filename == "<template>" else None

    def __enter__(self):
        self.previous = sys.gettrace()  # a debugger's or coverage's tracer, restored on exit
        sys.settrace(self._trace)

    def __exit__(self, *exc):
        sys.settrace(self.previous)
        return False
