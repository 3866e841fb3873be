"""Leaderboard tables and DVC metrics from score summaries."""

from __future__ import annotations

from evaltrail.aggregate.leaderboard import leaderboard, metrics_json, to_markdown


def summary(main, **metrics):
    return {
        "main_metric": main,
        "metrics": {m: {"mean": v, "ci_low": v - 0.1, "ci_high": v + 0.1, "n": 10} for m, v in metrics.items()},
    }


SUMMARIES = {
    ("hellaswag", "a"): summary("acc_norm", acc=0.3, acc_norm=0.35),
    ("mmlu", "a"): summary("exact_match", exact_match=0.25),
    ("mmlu", "b"): summary("exact_match", exact_match=0.28),
}


def test_rows_mark_the_main_metric():
    board = leaderboard(SUMMARIES)
    assert len(board) == 4
    main = board[board["main"]]
    assert sorted(zip(main["scenario"], main["model"], main["metric"])) == [
        ("hellaswag", "a", "acc_norm"),
        ("mmlu", "a", "exact_match"),
        ("mmlu", "b", "exact_match"),
    ]


def test_markdown_has_model_rows_and_scenario_columns():
    md = to_markdown(leaderboard(SUMMARIES))
    assert "| model | hellaswag (acc_norm) | mmlu (exact_match) |" in md
    assert "| a | 0.350 [0.250, 0.450] | 0.250 [0.150, 0.350] |" in md
    assert "| b | — | 0.280 [0.180, 0.380] |" in md


def test_metrics_json_nests_scenario_model_metric():
    assert metrics_json(leaderboard(SUMMARIES))["mmlu"] == {"a": {"exact_match": 0.25}, "b": {"exact_match": 0.28}}


def test_markdown_groups_every_metric_by_family_with_direction():
    summ = summary("exact_match", exact_match=0.25)
    summ["metrics"]["exact_match/robustness"] = {
        "mean": 0.2,
        "ci_low": 0.1,
        "ci_high": 0.3,
        "n": 10,
        "family": "robustness",
        "higher_is_better": True,
    }
    summ["metrics"]["ece_10_bin"] = {
        "mean": 0.3,
        "ci_low": 0.2,
        "ci_high": 0.4,
        "n": 10,
        "family": "calibration",
        "higher_is_better": False,
    }
    board = leaderboard({("mmlu", "a"): summ})
    assert list(board["family"]) == ["accuracy", "calibration", "robustness"]  # HELM's family order
    md = to_markdown(board)
    assert md.index("## Accuracy") < md.index("## Calibration") < md.index("## Robustness")
    assert "| mmlu | ece_10_bin ↓ | 10 | 0.300 [0.200, 0.400] |" in md
    assert "| mmlu | exact_match/robustness ↑ | 10 | 0.200 [0.100, 0.300] |" in md


def test_main_tables_follow_the_taxonomy_groups_in_helms_order():
    summaries = {
        **SUMMARIES,
        ("xstest", "a"): summary("over_refusal", over_refusal=0.1),
        ("mine", "a"): summary("acc", acc=0.5),
    }
    md = to_markdown(
        leaderboard(summaries), groups={"hellaswag": "Knowledge", "mmlu": "Knowledge", "xstest": "Safety: refusal"}
    )
    knowledge, safety, other = md.index("## Knowledge"), md.index("## Safety: refusal"), md.index("## Other")
    assert knowledge < safety < other < md.index("## All metrics")  # config.GROUPS order; ungrouped last
    assert md.index("| model | hellaswag (acc_norm) | mmlu (exact_match) |") in range(knowledge, safety)
    assert md.index("| model | mine (acc) |") > other


def test_every_scenario_conf_names_a_leaderboard_group(tmp_path):
    import pytest
    import yaml

    from evaltrail.config import GROUPS, build_scenario
    from evaltrail.errors import EvaltrailError

    from .conftest import ROOT

    for conf in sorted((ROOT / "conf" / "scenario").glob("*.yaml")):
        raw = yaml.safe_load(conf.read_text())
        if "defaults" in raw:  # a variant: its group comes from the scenario it extends
            continue
        assert raw["taxonomy"].get("group") in GROUPS, conf.name
    with pytest.raises(
        EvaltrailError, match=r"taxonomy\.group: 'trivia' is no leaderboard group; valid: question_answering"
    ):
        build_scenario({"taxonomy": {"group": "trivia"}}, "conf/scenario/x.yaml", "x")
