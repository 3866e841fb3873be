"""MMLU as cloze: the mmlu loader, registered again so a conf can score each option's text.

The instances are exactly mmlu's (same subjects option, same source selection); only the conf
differs (separate multiple choice, 0-shot), so this module adds nothing but the name.
"""

from __future__ import annotations

from . import register
from .mmlu import _select, load

register("mmlu_cloze", options=("subjects",), select_sources=_select)(load)
