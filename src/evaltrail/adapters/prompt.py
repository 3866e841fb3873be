"""Prompt pieces shared by the adapters: instructions header, labelled query, worked example."""

from __future__ import annotations

from ..config import ScenarioConfig
from ..schema import Instance


def header(cfg: ScenarioConfig, inst: Instance) -> str:
    """Instructions with {metadata} fields filled, then a blank line; '' when there are none."""
    return cfg.instructions.format(**inst.metadata) + "\n\n" if cfg.instructions else ""


def query(inst: Instance, input_noun: str | None, output_noun: str | None) -> str:
    """`Input: ...` then `Output:` on its own line; without nouns, the bare input (a continuation)."""
    text = f"{input_noun}: {inst.input}" if input_noun else inst.input
    return text + (f"\n{output_noun}:" if output_noun else "")


def gold_text(inst: Instance) -> str:
    """The first correct reference: what a worked example shows as the answer."""
    return inst.references[inst.gold_indices[0]].text


def example(inst: Instance, input_noun: str | None, output_noun: str | None) -> str:
    return f"{query(inst, input_noun, output_noun)} {gold_text(inst)}"
