"""Metrics, one module per HELM family; `get_metric(name)` returns a callable Metric and
`list_metrics()` names them all (the registry itself is evaltrail.metrics.registry).

Families: accuracy (choice, generated-text, language-modeling and code metrics), calibration,
worst_case (robustness and fairness), bias (word-list bias and BBQ), toxicity, efficiency, refusal
(safety: XSTest). The judged
families (battles, RAG) live with their judges in evaltrail.judge. `scoring` turns a scenario's
completions into per-instance values and a summary; `stats` holds the confidence intervals.

Per-instance kinds (a value per (instance, trial); a scenario's number is their mean):
- ``reference``: ``(gold: str, pred: str) -> float`` on generated text; an instance scores the
  max over its gold references.
- ``choice``: over the multiple-choice loglikelihood requests of all instances (a frame with
  columns choice_index, logprob, continuation, correct) -> value per instance.
- ``lm``: over rolling-loglikelihood rows (one per document) -> per-document value.
- ``text``: ``(texts: list[str]) -> list[float]``, reference-free, on generated text (toxicity).
- ``usage``: over the requests of all instances -> value per instance (efficiency).
- ``code``: over the generate rows (prompt, text, metadata with the unit test) -> value per
  instance, from running the completed program in evaltrail.sandbox.
- ``generated``: over the generate rows (text and metadata) -> value per instance, for the
  instances the metric applies to (refusal: over-refusal on safe prompts only).
Corpus kind (one value for the whole set, bootstrap CI over instances):
- ``corpus``: `fn` is a `Corpus` group (evaltrail.metrics.registry) computing several named
  metrics from per-instance arrays at once (calibration, bias, BBQ).

Robustness and fairness are not metrics of their own: every per-instance metric gets worst-case
companions ``<metric>/<perturbation>``, ``<metric>/robustness`` and ``<metric>/fairness`` when
the scenario has variants (see evaltrail.metrics.worst_case).
"""

from __future__ import annotations

from . import accuracy, bias, calibration, efficiency, refusal, toxicity  # noqa: F401  (families register on import)
from .registry import FAMILIES, PER_INSTANCE, Metric, check_metrics, get_metric, list_metrics, word_lists

__all__ = ["FAMILIES", "PER_INSTANCE", "Metric", "check_metrics", "get_metric", "list_metrics", "word_lists"]
