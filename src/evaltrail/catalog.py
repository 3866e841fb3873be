"""The scenario catalogue (`evaltrail scenarios`) and a contributor's check (`evaltrail scenario check`)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from . import resources
from .config import RunConfig, ScenarioConfig, resources_from_conf, scenario_from_conf
from .errors import EvaltrailError
from .paths import cache_dir
from .scenarios import loader_of, pinned_files
from .sources import KINDS, fetch_dir

TAXONOMY_KEYS = ("group", "task", "domain", "language")
COLUMNS = ("name", "group", "task", "domain", "language", "method", "main_metric", "license", "sources")


def conf_names(conf: str | Path) -> list[str]:
    return sorted(p.stem for p in (Path(conf) / "scenario").glob("*.yaml"))


def catalog_rows(conf: str | Path = "conf", problems: list[str] | None = None) -> list[dict]:
    """One row per scenario conf. With `problems`, a conf that does not load adds its one-line
    error there and the others are still listed (one bad file should not hide the catalogue);
    without, the first bad conf raises."""
    rows = []
    for name in conf_names(conf):
        try:
            cfg = scenario_from_conf(name, conf)
        except EvaltrailError as exc:
            if problems is None:
                raise
            if str(exc) not in problems:  # a bad conf/config.yaml fails every scenario alike: say it once
                problems.append(str(exc))
            continue
        tax = cfg.taxonomy or {}
        rows.append(
            {
                "name": name,
                "group": tax.get("group", ""),
                "task": tax.get("task", ""),
                "domain": tax.get("domain", ""),
                "language": tax.get("language", ""),
                "method": cfg.method,
                "main_metric": cfg.main_metric or "-",
                "license": cfg.license or "",
                "sources": str(len(cfg.sources)),
            }
        )
    return rows


def format_table(rows: list[dict]) -> str:
    widths = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in COLUMNS}
    line = lambda r: "  ".join(str(r[c]).ljust(widths[c]) for c in COLUMNS).rstrip()  # noqa: E731
    return "\n".join(
        [line({c: c for c in COLUMNS}), line({c: "-" * widths[c] for c in COLUMNS})]
        + [line(r) for r in rows]
        + [f"{len(rows)} scenarios"]
    )


def _check_config(cfg: ScenarioConfig, where: str) -> list[str]:
    from .adapters import get_adapter
    from .metrics import get_metric

    missing = [k for k in TAXONOMY_KEYS if not (cfg.taxonomy or {}).get(k)]
    if missing:
        raise EvaltrailError(f"{where}: taxonomy.{missing[0]} is missing (give group, task, domain, language)")
    if not cfg.license:
        raise EvaltrailError(f"{where}: license is missing")
    if not cfg.sources:
        raise EvaltrailError(f"{where}: sources is empty")
    for i, s in enumerate(cfg.sources):
        if s.get("kind") not in KINDS:
            raise EvaltrailError(f"{where}: sources[{i}].kind {s.get('kind')!r}; valid: {', '.join(KINDS)}")
        if not re.fullmatch(r"[0-9a-f]{64}", str(s.get("sha256", ""))):
            raise EvaltrailError(f"{where}: sources[{i}] ({s.get('file')}) is not pinned by a sha256")
    adapter = get_adapter(cfg.method, f"{where}: method")
    for m in cfg.metrics:
        metric = get_metric(m)
        if metric.kind == "reference" and not hasattr(adapter, "golds"):
            raise EvaltrailError(f"{where}: metric {m} scores text, but method {cfg.method} generates none")
    return [
        f"ok  config: method {cfg.method}, metrics {', '.join(cfg.metrics) or '(none)'}, "
        f"main {cfg.main_metric}, licence {cfg.license}, {len(cfg.sources)} pinned source(s)"
    ]


def _check_instances(cfg: ScenarioConfig, splits: dict[str, list]) -> list[str]:
    from .metrics import get_metric

    lines = []
    references_scored = any(get_metric(m).kind == "reference" for m in cfg.metrics)
    for split, insts in sorted(splits.items()):
        if not insts:
            raise EvaltrailError(f"scenario {cfg.name}: split {split!r} yielded no instances")
        ids = [i.instance_id for i in insts]
        dupes = len(ids) - len(set(ids))
        for inst in insts:
            if not inst.input.strip():
                raise EvaltrailError(f"scenario {cfg.name}: instance {inst.instance_id} has an empty input")
            if cfg.method.startswith("multiple_choice") and (len(inst.references) < 2 or not inst.gold_indices):
                raise EvaltrailError(
                    f"scenario {cfg.name}: instance {inst.instance_id} needs >= 2 options, one correct"
                )
            if cfg.method == "generation" and references_scored and not inst.gold_indices:
                raise EvaltrailError(f"scenario {cfg.name}: instance {inst.instance_id} has no correct reference")
        lines.append(f"ok  split {split}: {len(insts)} instances ({dupes} exact duplicates, dropped at sampling)")
    return lines


def check_scenario(name: str, conf: str | Path = "conf") -> list[str]:
    """Validate one scenario end to end short of inference; raise EvaltrailError on the first problem."""
    from .adapters import get_adapter
    from .metrics import word_lists

    where = f"{conf}/scenario/{name}.yaml"
    cfg = scenario_from_conf(name, conf)
    loader = loader_of(cfg)
    loader.check(cfg)
    lines = _check_config(cfg, where)
    run = RunConfig(
        seed=0,
        max_eval_instances=10,
        bootstrap_samples=0,
        scenarios=[name],
        models=[],
        scenario={name: cfg},
        model={},
        mlflow={},
        resources=resources_from_conf(conf),
    )
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / name
        records = fetch_dir(
            pinned_files(cfg, run.resources, word_lists(cfg.metrics)), raw, cache_dir(), f"{where}: sources"
        )
        lines.append(f"ok  sources: {len(records)} file(s) fetched, every sha256 matches")
        splits = loader.load(cfg, raw)
        again = loader.load(cfg, raw)
        lists = resources.load_perturbation_resources(run.resources, cfg, raw)
    lines += _check_instances(cfg, splits)
    if {k: [i.instance_id for i in v] for k, v in splits.items()} != {
        k: [i.instance_id for i in v] for k, v in again.items()
    }:
        raise EvaltrailError(f"scenario {name}: instance ids differ between two loads (not content hashes?)")
    lines.append("ok  instance ids are stable across loads")
    pairs = get_adapter(cfg.method).build(cfg, run, splits, lists)
    if not pairs or any(not r.prompt for _, r in pairs):
        raise EvaltrailError(f"scenario {name}: the adapter built no requests (or an empty prompt)")
    lines.append(
        f"ok  adapter: {len(pairs)} requests for {len({i.instance_id for i, _ in pairs})} sampled instances; "
        f"first prompt ends {pairs[0][1].prompt[-60:]!r}"
    )
    variants = sorted({i.perturbation for i, _ in pairs if i.perturbation})
    if cfg.perturbations:
        lines.append(f"ok  perturbations: variants made for {', '.join(variants) or '(none changed any input)'}")
    return lines
