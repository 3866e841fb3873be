"""MLflow: one run per (scenario, model) cell, tagged with the lineage that produced its numbers.

Each run carries `evaltrail.fingerprint`, a hash of the cell's results and lineage (not of the
git commit). Re-running aggregate on unchanged results finds that run instead of logging a twin.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..hashing import stable_id

DEFAULT_URI = "sqlite:///mlflow.db"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


_READY: set[str] = set()
"""Tracking URIs whose store this process has already made sure exists."""


def connect() -> str:
    """Point MLflow at the tracking URI and return it. A local SQLite store is created (MLflow's
    schema migrations) under an exclusive lock on the file: two parallel `dvc queue` workers
    creating it at once otherwise break the migration (seen: AttributeError in alembic)."""
    import fcntl

    import mlflow

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    if uri.startswith("sqlite:///") and uri not in _READY:  # once per process, not per logged cell
        db = Path(uri.removeprefix("sqlite:///"))
        db.parent.mkdir(parents=True, exist_ok=True)
        with open(db, "ab") as handle:  # flock, not SQLite's own fcntl locks: the two do not interact
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                mlflow.MlflowClient().search_experiments(max_results=1)  # creates/migrates the schema
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        _READY.add(uri)
    return uri


_SECRET_PARAM = re.compile(r"(?i)([?&][^=&#]*(?:key|token|secret|password|passwd|auth|sig)[^=&#]*=)[^&#]*")


def shown_uri(uri: str) -> str:
    """The URI without its credentials (a user:password part, a key/token/secret/password query
    value), for files, logs and messages: every URL shown anywhere passes through here."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        uri = urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
    return _SECRET_PARAM.sub(r"\1***", uri)


def redacted(obj):
    """A config with every URL in it shown_uri'd (a served model's base_url), for MLflow."""
    if isinstance(obj, dict):
        return {k: redacted(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redacted(v) for v in obj)
    return shown_uri(obj) if isinstance(obj, str) and "://" in obj else obj


def _flatten(prefix: str, obj, out: dict) -> dict:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj
    return out


def flat_params(config: dict) -> dict[str, str]:
    """Resolved config as MLflow params; long values (source lists) go in the config artifact."""
    return {k: str(v) for k, v in _flatten("", config, {}).items() if len(str(v)) <= 500}


def fingerprint(summary: dict, tags: dict) -> str:
    return stable_id({"summary": summary, "tags": {k: v for k, v in tags.items() if k != "evaltrail.git_commit"}}, 32)


PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag: the UI nests a run under this parent


def _existing(experiment: str, fp: str):
    import mlflow

    connect()
    exp = mlflow.set_experiment(experiment)
    found = mlflow.search_runs(
        [exp.experiment_id], filter_string=f"tags.`evaltrail.fingerprint` = '{fp}'", output_format="list", max_results=1
    )
    return found[0].info.run_id if found else None


def log_parent(experiment: str, board, commit: str | None, artifacts: list[Path]) -> str:
    """The aggregate run every cell run nests under: the leaderboard's numbers as its fingerprint,
    its files as artifacts; reused while the leaderboard is unchanged."""
    import mlflow

    fp = stable_id({"leaderboard": board.to_dict(orient="records")}, 32)
    found = _existing(experiment, fp)
    if found:
        return found
    with mlflow.start_run(
        run_name="aggregate",
        tags={"evaltrail.fingerprint": fp, "evaltrail.kind": "aggregate", "evaltrail.git_commit": commit or ""},
    ) as active:
        for path in artifacts:
            mlflow.log_artifact(str(path))
        return active.info.run_id


def attach(run_id: str, directory: Path, artifact_path: str) -> bool:
    """Add a directory's files to an existing run (the aggregate parent gets the HTML report).

    False when this tracking store has no such run: results aggregated elsewhere (a fresh clone
    whose `aggregate` is up to date) are not an error, the caller says how to log them here."""
    import mlflow
    from mlflow.exceptions import MlflowException

    connect()
    client = mlflow.MlflowClient()
    try:
        client.get_run(run_id)
    except MlflowException:
        return False
    client.log_artifacts(run_id, str(directory), artifact_path)
    return True


def log_cell(
    experiment: str,
    name: str,
    config: dict,
    summary: dict,
    tags: dict,
    artifacts: list[Path],
    parent: str | None = None,
) -> tuple[str, bool]:
    """Log one cell unless an identical run exists (then move it under `parent`); return (run_id, created).
    The config is logged without credentials (redacted)."""
    import mlflow

    config = redacted(config)
    fp = fingerprint(summary, tags)
    found = _existing(experiment, fp)
    if found:
        if parent:
            mlflow.MlflowClient().set_tag(found, PARENT_TAG, parent)
        return found, False
    nest = {PARENT_TAG: parent} if parent else {}
    with mlflow.start_run(run_name=name, tags={**tags, **nest, "evaltrail.fingerprint": fp}) as active:
        mlflow.log_params(flat_params(config))
        mlflow.log_metrics(
            {
                f"{m}{suffix}": st[key]
                for m, st in summary["metrics"].items()
                for suffix, key in (("", "mean"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"))
                if st[key] is not None
            }
        )
        mlflow.log_dict(config, "config.json")
        for path in artifacts:
            mlflow.log_artifact(str(path))
        return active.info.run_id, True
