"""Calibration metrics: hand-computed cases, a brute-force reference, and a randomized comparison with
the uncertainty-calibration 0.1.4 code HELM 0.5.16 calls (read from its sdist, never installed)."""

from __future__ import annotations

import bisect
import subprocess
import sys
import tarfile
from typing import List, Tuple, TypeVar

import numpy as np
import pytest

from evaltrail.metrics.calibration import (
    MIN_RELIABLE_N,
    calibration_metrics,
    ece,
    equal_mass_edges,
    is_reliable,
    selective_acc_at,
    selective_cov_acc_area,
)

from .test_metrics_reference import exec_functions

UNCAL = ("uncertainty-calibration", "0.1.4")  # crfm-helm 0.5.16 requires ~=0.1.4
UNCAL_UTILS = "uncertainty-calibration-0.1.4/calibration/utils.py"


@pytest.fixture(scope="module")
def uncal():
    """The package's binning, ECE and selective functions (utils.py), defined via `ast`."""
    from evaltrail.paths import cache_dir

    sdists = cache_dir() / "sdists"
    sdist = sdists / f"{UNCAL[0]}-{UNCAL[1]}.tar.gz"
    if not sdist.exists():  # published as an sdist only, so not `wheel_path`
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                str(sdists),
                f"{UNCAL[0]}=={UNCAL[1]}",
            ],
            capture_output=True,
            text=True,
        )
        assert sdist.exists(), f"pip download {UNCAL[0]}=={UNCAL[1]} failed: {proc.stderr[-1500:]}"
    with tarfile.open(sdist) as tar:
        source = tar.extractfile(UNCAL_UTILS).read().decode()
    ns = {"np": np, "bisect": bisect, "List": List, "Tuple": Tuple, "TypeVar": TypeVar}
    return exec_functions(
        source,
        [
            "Data",
            "Bins",
            "BinnedData",
            "T",
            "eps",
            "split",
            "get_equal_bins",
            "get_equal_prob_bins",
            "get_discrete_bins",
            "lower_bound_scaling_ce",
            "_get_ce",
            "bin",
            "fast_bin",
            "difference_mean",
            "get_bin_probs",
            "plugin_ce",
            "get_ece",
            "get_ece_em",
            "get_selective_stats",
        ],
        ns,
    )


# --- brute force, straight from the definitions ---------------------------------------------------


def brute_ece(probs, correct, num_bins):
    n, s = len(probs), sorted(probs)
    k = min(num_bins, n)
    ends = [sum(n // k + (i < n % k) for i in range(j + 1)) for j in range(k)]  # numpy.array_split
    edges = sorted({(s[e - 1] + s[e]) / 2 for e in ends[:-1]} | {1.0})
    bins = {}
    for p, c in zip(probs, correct):
        j = next(j for j, e in enumerate(edges) if p <= e)  # first upper edge >= p
        bins.setdefault(j, []).append((p, c))
    return sum(len(b) / n * abs(sum(p for p, _ in b) / len(b) - sum(c for _, c in b) / len(b)) for b in bins.values())


def brute_selective(probs, correct, coverage=0.1):
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))  # ties: input order
    accs = [sum(correct[i] for i in order[:k]) / k for k in range(1, len(order) + 1)]
    return sum(accs) / len(accs), accs[int(coverage * len(accs))]


# --- hand-computed ------------------------------------------------------------------------------


def test_ece_one_instance_per_bin_and_one_bin():
    probs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    correct = [0, 0, 1, 0, 1, 1, 0, 1, 1, 1]
    assert ece(probs, correct, 10) == pytest.approx(3.3 / 10)  # mean |p - c|
    assert ece(probs, correct, 1) == pytest.approx(0.05)  # |0.55 - 0.6|


def test_ece_equal_mass_bins():
    # sorted [.1 .3 .6 | .8 .9]: first run one longer; edge (.6 + .8) / 2 = .7
    probs, correct = [0.9, 0.1, 0.8, 0.3, 0.6], [1, 0, 0, 1, 1]
    assert equal_mass_edges(probs, 2).tolist() == pytest.approx([0.7, 1.0])
    assert ece(probs, correct, 2) == pytest.approx(3 / 5 * (2 / 3 - 1 / 3) + 2 / 5 * (0.85 - 0.5))
    assert ece(probs, correct, 10) == pytest.approx(np.mean(np.abs(np.subtract(probs, correct))))


def test_ece_ties_fall_in_the_lower_bin():
    # runs [.5 .5 | .5 .9]: edge (.5 + .5) / 2 = .5, and every .5 is <= it -> bins of 3 and 1
    probs, correct = [0.5, 0.5, 0.5, 0.9], [1, 0, 0, 1]
    assert equal_mass_edges(probs, 2).tolist() == [0.5, 1.0]
    assert ece(probs, correct, 2) == pytest.approx((abs(1.5 - 1) + abs(0.9 - 1)) / 4)
    assert ece([0.3, 0.7, 0.5], [1, 0, 1], 10) == pytest.approx((0.7 + 0.7 + 0.5) / 3)  # 3 bins only


def test_perfect_calibration_is_zero():
    assert ece([0.25] * 4, [1, 0, 0, 0], 10) == 0.0
    assert ece([0.5, 0.5, 1.0, 1.0], [1, 0, 1, 1], 10) == 0.0
    assert ece([1.0, 0.0], [1, 0], 1) == 0.0 and ece([0.5, 0.5], [0, 1], 1) == 0.0


def test_selective_metrics():
    probs, correct = [0.6, 0.9, 0.7, 0.8], [1, 1, 1, 0]  # by confidence: 1, 0, 1, 1
    assert selective_cov_acc_area(probs, correct) == pytest.approx((1 + 1 / 2 + 2 / 3 + 3 / 4) / 4)
    assert selective_acc_at(probs, correct) == 1.0  # int(0.4) = 0 -> top 1
    # HELM's accs[int(0.1 * n)] is the top n // 10 + 1, one more than 10%
    ten = np.linspace(1.0, 0.1, 10)
    assert selective_acc_at(ten, [0] + [1] * 9) == 0.5
    assert selective_acc_at(ten, [0] + [1] * 9, coverage=0.5) == pytest.approx(5 / 6)


def test_selective_ties_keep_input_order():
    assert selective_cov_acc_area([0.5, 0.5], [0, 1]) == 0.25
    assert selective_cov_acc_area([0.5, 0.5], [1, 0]) == 0.75
    assert selective_cov_acc_area([0.2, 0.9, 0.9], [1, 1, 0]) == pytest.approx((1 + 1 / 2 + 2 / 3) / 3)


def test_calibration_metrics_dict_empty_and_reliability():
    out = calibration_metrics([0.9, 0.6], [1, 0])
    assert list(out) == ["ece_10_bin", "ece_1_bin", "selective_cov_acc_area", "selective_acc@10"]
    assert out["ece_10_bin"] == pytest.approx(0.35) and out["ece_1_bin"] == pytest.approx(0.25)
    assert out["selective_cov_acc_area"] == 0.75 and out["selective_acc@10"] == 1.0
    assert calibration_metrics([], []) == dict.fromkeys(out)
    assert MIN_RELIABLE_N == 300 and not is_reliable(299) and is_reliable(300)


@pytest.mark.parametrize("probs,correct", [([1.5], [1]), ([float("nan")], [0]), ([0.5], [2]), ([0.5, 0.2], [1])])
def test_rejects_bad_input(probs, correct):
    with pytest.raises(ValueError):
        calibration_metrics(probs, correct)


# --- randomized: brute force and the package's own code -------------------------------------------


def _samples(seed=0, count=150):
    rng = np.random.default_rng(seed)
    for i in range(count):
        n = int(rng.integers(1, 400))
        probs = rng.beta(2, 1, n)
        if i % 3 == 0:
            probs = np.round(probs, 1)  # many ties, values on bin edges
        elif i % 3 == 1:
            probs[rng.random(n) < 0.2] = 1.0  # saturated confidences
        correct = (rng.random(n) < probs).astype(int)
        yield probs, correct


def test_matches_brute_force():
    for probs, correct in _samples(seed=1, count=60):
        p, c = probs.tolist(), correct.tolist()
        for bins in (1, 3, 10):
            assert ece(p, c, bins) == pytest.approx(brute_ece(p, c, bins), abs=1e-12)
        area, at10 = brute_selective(p, c)
        assert selective_cov_acc_area(p, c) == pytest.approx(area, abs=1e-12)
        assert selective_acc_at(p, c) == pytest.approx(at10, abs=1e-12)


def test_ece_matches_uncertainty_calibration(uncal):
    for probs, correct in _samples():
        assert ece(probs, correct, 10) == pytest.approx(uncal["get_ece_em"](probs, correct, num_bins=10), abs=1e-12)
        assert ece(probs, correct, 15) == pytest.approx(uncal["get_ece_em"](probs, correct), abs=1e-12)
        assert ece(probs, correct, 1) == pytest.approx(uncal["get_ece"](probs, correct, num_bins=1), abs=1e-12)


def test_selective_matches_uncertainty_calibration_without_ties(uncal):
    """Compared where probs are distinct: with ties HELM's np.argsort(-probs) (unstable) orders them
    as numpy's build and CPU decide; ours keeps input order (checked against brute force above)."""
    compared = 0
    for probs, correct in _samples(seed=2):
        if len(np.unique(probs)) < len(probs):
            continue
        compared += 1
        area, at10 = uncal["get_selective_stats"](probs, correct)
        assert selective_cov_acc_area(probs, correct) == pytest.approx(area, abs=1e-12)
        assert selective_acc_at(probs, correct) == at10
    assert compared >= 30
