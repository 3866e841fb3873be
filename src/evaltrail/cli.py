"""The `evaltrail` command: trace a leaderboard number to its inputs, verify a cell's answers, share
answers, check a config, derive stage deps."""

from __future__ import annotations

import argparse
import sys

from .config import load_params, model_config, scenario_config
from .errors import EvaltrailError


def _trace(args) -> int:
    from .provenance.trace import show_instance, trace

    run = load_params()
    scenario_config(run, args.scenario)
    model_config(run, args.model)
    if args.instance:
        print("\n".join(show_instance(args.scenario, args.model, args.instance)))
        return 0
    if args.battle:
        from .provenance.battle_trace import trace_battle

        result = trace_battle(run, args.scenario, args.model)
    else:
        result = trace(run, args.scenario, args.model, args.metric)
    print("\n".join(result.lines))
    if result.problems:
        print(f"error: trace failed: {result.problems[0]}", file=sys.stderr)
        return 1
    return 0


def _verify(args) -> int:
    from .io import write_json
    from .paths import verify_path
    from .provenance.verify import verify

    result = verify(load_params(), args.scenario, args.model, None if args.all else args.sample, args.seed)
    print("\n".join(result.lines()))
    write_json(verify_path(args.scenario, args.model), result.record())
    return 0 if result.ok else 1


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _costs(args) -> int:
    from pathlib import Path

    from .costs import costs_markdown
    from .io import read_json
    from .paths import infer_stats_path

    run = load_params(args.params)
    cells, missing = {}, []
    for s in run.scenarios:
        for m in run.models:
            path = infer_stats_path(s, m)
            if path.is_file():
                cells[(s, m)] = read_json(path)
            else:
                missing.append(str(path))
    if missing:
        raise EvaltrailError(f"{missing[0]}: missing ({len(missing)} cells); run `dvc repro` first")
    text = costs_markdown(cells)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


def _refusal_check(args) -> int:
    from pathlib import Path

    from .io import write_json
    from .metrics.refusal import agreement, read_annotated, string_match

    files = {Path(p).name: read_annotated(p) for p in args.csv}
    groups = {**files, "all": [r for rows in files.values() for r in rows]} if len(files) > 1 else files
    result = {}
    for name, rows in groups.items():
        pred, gold = [string_match(r["completion"]) for r in rows], [r["final_label"] for r in rows]
        result[name] = agreement(pred, gold, args.samples, args.seed)
        acc, kappa = result[name]["accuracy"], result[name]["kappa"]
        print(
            f"{name}: n={result[name]['n']}, accuracy {acc['mean']:.3f} [{acc['ci_low']:.3f}, {acc['ci_high']:.3f}], "
            f"kappa {kappa['mean']:.3f} [{kappa['ci_low']:.3f}, {kappa['ci_high']:.3f}]"
            + (f"  WARNING: {result[name]['warning']}" if "warning" in result[name] else "")
        )
    if args.out:
        write_json(args.out, {"classifier": "string_match", "samples": args.samples, "seed": args.seed, **result})
    return 0


def _validate(args) -> int:
    from .adapters import get_adapter
    from .metrics import get_metric
    from .scenarios import loader_of

    run = load_params(args.params)
    for name, cfg in run.scenario.items():
        loader_of(cfg).check(cfg)
        loader_of(cfg).sources(cfg)
        get_adapter(cfg.method, f"{args.params}: scenario.{name}.method")
        for m in cfg.metrics:
            get_metric(m)
    print(f"{args.params}: ok ({len(run.scenario)} scenarios x {len(run.model)} models)")
    return 0


def _scenarios(args) -> int:
    from .catalog import catalog_rows, format_table

    problems: list[str] = []
    print(format_table(catalog_rows(args.conf, problems)))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0  # the good ones are listed, but a bad conf still fails CI


def _scenario_check(args) -> int:
    from .catalog import check_scenario

    for line in check_scenario(args.name, args.conf):
        print(line)
    return 0


def _ratings(args) -> int:
    from .aggregate.battle_log import rate_log, to_markdown
    from .io import write_json

    r = rate_log(args.log, args.samples, args.seed, args.anchor)
    print(to_markdown(r), end="")
    if args.out:
        write_json(
            args.out,
            {
                "log": str(args.log),
                "samples": r.samples,
                "seed": r.seed,
                "level": r.level,
                "anchor": r.anchor,
                "anchor_rating": r.anchor_rating,
                "degenerate_rounds": r.degenerate_rounds,
                "ratings": r.table.reset_index().to_dict(orient="records"),
            },
        )
    return 0


def _request_cache():
    from .backends.cache import RequestCache
    from .paths import request_cache_path

    return RequestCache(request_cache_path())  # where the infer stage caches


def _cache_export(args) -> int:
    from .backends.answers import export_answers

    result = export_answers(load_params(), _request_cache(), args.out, args.scenario, args.model)
    for cell in result.cells:
        if cell.missing:
            print(f"{cell.missing} of {cell.requests} requests of {cell.scenario} x {cell.model} are not in the cache")
    print(f"{args.out}: {result.rows} answers of {len(result.cells)} cells")
    return 0


def _cache_import(args) -> int:
    from .backends.answers import import_answers, read_answers

    try:
        table = read_answers(args.file)
    except EvaltrailError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = import_answers(table, load_params(), _request_cache())
    for r in result.refused:
        print(f"refused {r.rows} row{'s' * (r.rows != 1)} of {args.file}: {r.reason}", file=sys.stderr)
    print(
        f"{args.file}: imported {result.imported}, already present {result.present}, "
        f"conflicting {result.conflicts} (the cached answer is kept), "
        f"refused {sum(r.rows for r in result.refused)}"
    )
    return 1 if result.refused else 0


def _deps(args) -> int:
    from .provenance.deps import DVC_YAML, FIX, drift, write

    if args.write:
        changed = write()
        print(
            f"{DVC_YAML}: rewrote the code deps of {', '.join(changed)}"
            if changed
            else f"{DVC_YAML}: code deps already derived"
        )
        return 0
    problems = drift()
    print("\n".join(map(str, problems)) or f"{DVC_YAML}: every stage's code deps match its imports")
    if problems:
        print(f"error: {len(problems)} code dep(s) out of date: run `{FIX}`", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evaltrail", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("trace", help="trace one leaderboard number back to pinned inputs")
    p.add_argument("--scenario", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--metric", help="the leaderboard metric to trace (required unless --instance)")
    p.add_argument("--instance", help="show one instance end to end instead: prompts, completions, scores")
    p.add_argument(
        "--battle",
        action="store_true",
        help="trace the model's battle rating on the scenario instead: verdicts, answers, judge weights",
    )
    p.set_defaults(fn=_trace)
    w = sub.add_parser(
        "verify",
        help="recompute a seeded sample of a committed cell from its pinned inputs and "
        "compare it with the committed completions bit for bit",
    )
    w.add_argument("--scenario", required=True)
    w.add_argument("--model", required=True)
    size = w.add_mutually_exclusive_group()
    size.add_argument("--sample", type=_positive, default=50, help="distinct requests to recompute (default 50)")
    size.add_argument("--all", action="store_true", help="recompute every request")
    w.add_argument("--seed", type=int, default=0, help="seed of the sample (and of the bootstrap)")
    w.set_defaults(fn=_verify)
    v = sub.add_parser("validate", help="check params.yaml: scenarios, methods, metrics, keys")
    v.add_argument("--params", default="params.yaml")
    v.set_defaults(fn=_validate)
    s = sub.add_parser("scenarios", help="list every scenario in conf/scenario with its taxonomy")
    s.add_argument("--conf", default="conf")
    s.set_defaults(fn=_scenarios)
    c = sub.add_parser("scenario", help="scenario tools: `evaltrail scenario check NAME`")
    csub = c.add_subparsers(dest="action", required=True)
    chk = csub.add_parser("check", help="validate one scenario: pins, licence, loader, ids, adapter")
    chk.add_argument("name")
    chk.add_argument("--conf", default="conf")
    chk.set_defaults(fn=_scenario_check)
    r = sub.add_parser(
        "ratings",
        help="Bradley-Terry ratings with bootstrap CIs from a battle log (JSONL/JSON/CSV: "
        "model_a, model_b, winner), e.g. human votes",
    )
    r.add_argument("log")
    r.add_argument("--samples", type=int, default=1000, help="bootstrap rounds")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--anchor", help="the model held at 1000 (default: the mean rating is)")
    r.add_argument("--out", help="also write the ratings as JSON here")
    r.set_defaults(fn=_ratings)
    rc = sub.add_parser(
        "refusal-check",
        help="how far the string-match refusal classifier agrees with people: accuracy and Cohen's kappa "
        "with bootstrap CIs on XSTest's annotated completions CSVs (model_completions/*.csv)",
    )
    rc.add_argument("csv", nargs="+")
    rc.add_argument("--samples", type=int, default=1000, help="bootstrap rounds")
    rc.add_argument("--seed", type=int, default=0)
    rc.add_argument("--out", help="also write the result as JSON here")
    rc.set_defaults(fn=_refusal_check)
    co = sub.add_parser(
        "costs", help="what params.yaml's run cost on this machine (results/costs), as a Markdown table"
    )
    co.add_argument("--params", default="params.yaml")
    co.add_argument("--out", help="also write the table here (e.g. beside a published table)")
    co.set_defaults(fn=_costs)
    k = sub.add_parser("cache", help="share the request cache's answers: `evaltrail cache export|import`")
    ksub = k.add_subparsers(dest="action", required=True)
    exp = ksub.add_parser("export", help="write the cached answers of params.yaml's cells, with their keys, to Parquet")
    exp.add_argument("--out", required=True)
    exp.add_argument("--scenario", action="extend", nargs="+", help="only these scenarios (default: all)")
    exp.add_argument("--model", action="extend", nargs="+", help="only these models (default: all)")
    exp.set_defaults(fn=_cache_export)
    imp = ksub.add_parser(
        "import", help="add an export's answers to the cache where this machine's model identity computed them"
    )
    imp.add_argument("file")
    imp.set_defaults(fn=_cache_import)
    d = sub.add_parser("deps", help="the code deps of each stage in dvc.yaml, derived from its imports")
    mode = d.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="list what they lack or list needlessly; exit 1 if any")
    mode.add_argument("--write", action="store_true", help="rewrite them (data deps and comments stay)")
    d.set_defaults(fn=_deps)
    args = parser.parse_args(argv)
    if args.command == "trace" and not (args.metric or args.instance or args.battle):
        parser.error("trace needs --metric (or --instance, or --battle)")
    try:
        return args.fn(args)
    except EvaltrailError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
