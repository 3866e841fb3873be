"""Model against model on shared instances: Bradley-Terry ratings from per-instance outcomes of
every scenario's main metric, and a paired bootstrap of each pair's difference per scenario."""

from __future__ import annotations

from itertools import combinations

import pandas as pd

from .ranking import arena_ratings, battles_from_outcomes, paired_bootstrap


def main_outcomes(scores: dict[tuple[str, str], pd.DataFrame], summaries: dict[tuple[str, str], dict]) -> pd.DataFrame:
    """Long (scenario, instance_id, model, value, higher_is_better): each original instance's main
    metric, trials averaged."""
    parts = []
    for (s, m), sc in sorted(scores.items()):
        summ = summaries[(s, m)]
        main = summ.get("main_metric")
        st = summ["metrics"].get(main) if main else None
        if st is None or st.get("higher_is_better") is None or st.get("ci") == "bootstrap":
            continue  # no per-instance outcome, or no better direction to battle on
        rows = sc[(sc["metric"] == main) & sc["perturbation"].isna()]
        per = rows.groupby("instance_id", sort=True)["value"].mean().reset_index()
        parts.append(per.assign(scenario=s, model=m, higher_is_better=bool(st["higher_is_better"])))
    cols = ["scenario", "instance_id", "model", "value", "higher_is_better"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def battles(outcomes: pd.DataFrame) -> pd.DataFrame:
    """One battle per instance and pair of models, over all scenarios (ids prefixed by scenario)."""
    parts = []
    for (s, hib), part in outcomes.groupby(["scenario", "higher_is_better"], sort=True):
        long = part.assign(instance_id=s + ":" + part["instance_id"])[["instance_id", "model", "value"]]
        parts.append(battles_from_outcomes(long, "higher" if hib else "lower").assign(scenario=s))
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["instance_id", "model_a", "model_b", "winner"])
    )


def ratings(outcomes: pd.DataFrame, samples: int, seed: int) -> tuple[pd.DataFrame, str]:
    """Arena-style ratings (scale 400, base 10, mean 1000) with bootstrap CIs and CI ranks, and
    which fit was used: the unpenalized MLE, or an L2-penalized one (C=1) when the MLE does not
    exist (a model never lost)."""
    b = battles(outcomes)
    if b.empty or b[["model_a", "model_b"]].stack().nunique() < 2:
        return pd.DataFrame(columns=["rating", "ci_low", "ci_high", "rank", "battles"]), "none"
    try:
        return arena_ratings(b, samples, seed).table, "mle"
    except ValueError:
        return arena_ratings(b, samples, seed, C=1.0).table, "l2 (C=1)"


def differences(outcomes: pd.DataFrame, samples: int, seed: int) -> pd.DataFrame:
    """Per scenario and pair of models: mean difference A - B of the main metric with a paired
    bootstrap 95% CI, and whether the CI includes 0 (the data do not separate them)."""
    rows = []
    for s, part in outcomes.groupby("scenario", sort=True):
        wide = part.pivot(index="instance_id", columns="model", values="value").dropna()
        for a, b in combinations(sorted(wide.columns), 2):
            d = paired_bootstrap(wide[a], wide[b], samples, seed)
            rows.append(
                {
                    "scenario": s,
                    "model_a": a,
                    "model_b": b,
                    "n": d.n,
                    "diff": d.diff,
                    "ci_low": d.ci_low,
                    "ci_high": d.ci_high,
                    "includes_zero": d.includes_zero,
                }
            )
    return pd.DataFrame(
        rows, columns=["scenario", "model_a", "model_b", "n", "diff", "ci_low", "ci_high", "includes_zero"]
    )


def to_markdown(table: pd.DataFrame, fit: str, diffs: pd.DataFrame) -> list[str]:
    lines = [
        "",
        "## Pairwise",
        "",
        f"Bradley-Terry ratings from per-instance wins on each scenario's main metric "
        f"(fit: {fit}; 95% bootstrap CI; rank = 1 + models whose lower bound beats my upper bound).",
        "",
        "| model | rating [95% CI] | rank | battles |",
        "|---|---|---|---|",
    ]
    for m, r in table.iterrows():
        lines.append(
            f"| {m} | {r['rating']:.0f} [{r['ci_low']:.0f}, {r['ci_high']:.0f}] "
            f"| {int(r['rank'])} | {int(r['battles'])} |"
        )
    lines += [
        "",
        "Paired bootstrap of A - B per scenario; ≈ marks a difference whose 95% CI includes 0.",
        "",
        "| scenario | A | B | n | A - B [95% CI] | |",
        "|---|---|---|---|---|---|",
    ]
    for _, d in diffs.iterrows():
        lines.append(
            f"| {d['scenario']} | {d['model_a']} | {d['model_b']} | {d['n']} | "
            f"{d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] | {'≈' if d['includes_zero'] else ''} |"
        )
    return lines
