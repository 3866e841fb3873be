"""Plot data (CSV) for `dvc plots show` and the report, and the per-subject breakdown.

Each file is long-form with a `label` column naming its series, so DVC's stock templates draw
every (model, scenario) as its own point or bar.
"""

from __future__ import annotations

import pandas as pd

ACC_VS_TOKENS = "accuracy_vs_tokens.csv"
RELIABILITY = "reliability.csv"
SUBJECTS = "mmlu_subjects.csv"
SUBJECT_SCENARIO = "mmlu"


def accuracy_vs_tokens(summaries: dict[tuple[str, str], dict]) -> pd.DataFrame:
    """Main accuracy metric against tokens per instance (prompt + output): the cost that follows
    from pinned inputs (seconds and tokens/s measure the machine: results/costs)."""
    rows = []
    for (s, m), summ in sorted(summaries.items()):
        main, metrics = summ.get("main_metric"), summ["metrics"]
        st, sent, out = metrics.get(main or ""), metrics.get("prompt_tokens"), metrics.get("output_tokens")
        if st and sent and out and st.get("family", "accuracy") == "accuracy" and st["mean"] is not None:
            rows.append(
                {
                    "label": f"{m} · {s}",
                    "model": m,
                    "scenario": s,
                    "metric": main,
                    "accuracy": st["mean"],
                    "tokens_per_instance": sent["mean"] + out["mean"],
                }
            )
    return pd.DataFrame(rows, columns=["label", "model", "scenario", "metric", "accuracy", "tokens_per_instance"])


def reliability(summaries: dict[tuple[str, str], dict]) -> pd.DataFrame:
    rows = [
        {"label": f"{m} · {s}", "model": m, "scenario": s, **b}
        for (s, m), summ in sorted(summaries.items())
        for b in summ.get("reliability", [])
    ]
    return pd.DataFrame(rows, columns=["label", "model", "scenario", "bin", "confidence", "accuracy", "n"])


def subjects(summaries: dict[tuple[str, str], dict], scenario: str = SUBJECT_SCENARIO) -> pd.DataFrame:
    """Per subject and model: the main metric's mean and n."""
    rows = []
    for (s, m), summ in sorted(summaries.items()):
        main = summ.get("main_metric")
        if s != scenario:
            continue
        for subject, metrics in sorted(summ.get("groups", {}).items()):
            if main in metrics:
                rows.append(
                    {
                        "label": f"{subject} · {m}",
                        "model": m,
                        "subject": subject,
                        "accuracy": metrics[main]["mean"],
                        "n": metrics[main]["n"],
                    }
                )
    return pd.DataFrame(rows, columns=["label", "model", "subject", "accuracy", "n"])


def subjects_markdown(table: pd.DataFrame, summaries: dict[tuple[str, str], dict]) -> list[str]:
    """MMLU by subject, with the micro average (over questions, the leaderboard's number) and the
    macro average (over subjects, each weighing the same), labelled."""
    if table.empty:
        return []
    wide = table.pivot(index="subject", columns="model", values="accuracy")
    models = list(wide.columns)
    main = summaries[(SUBJECT_SCENARIO, models[0])]["main_metric"]
    lines = [
        "",
        f"## {SUBJECT_SCENARIO} by subject ({main})",
        "",
        "| subject | n | " + " | ".join(models) + " |",
        "|---" * (len(models) + 2) + "|",
    ]
    n = table.groupby("subject")["n"].first()
    for subject, row in wide.iterrows():
        lines.append(f"| {subject} | {n[subject]} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    micro = [summaries[(SUBJECT_SCENARIO, m)]["metrics"][main]["mean"] for m in models]
    lines.append(
        "| **micro average** (over questions) | " + f"{int(n.sum())} | " + " | ".join(f"{v:.3f}" for v in micro) + " |"
    )
    lines.append(
        "| **macro average** (over subjects) | " + f"{len(n)} | " + " | ".join(f"{v:.3f}" for v in wide.mean()) + " |"
    )
    return lines
