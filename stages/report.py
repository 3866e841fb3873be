"""report: a static HTML report (results/report/index.html) that opens from disk, no server."""

import sys

from evaltrail.io import read_json
from evaltrail.paths import MLFLOW_RUNS_JSON
from evaltrail.report import REPORT_DIR, build_report
from evaltrail.stage import run_stage
from evaltrail.stage_params import load_stage_params
from evaltrail.tracking import attach, shown_uri, tracking_uri


def main() -> None:
    built = build_report(load_stage_params("report"), REPORT_DIR)
    largest = max(built.files, key=built.files.get)
    print(
        f"report: {len(built.files)} files, {built.total_bytes / 1e6:.2f} MB "
        f"(largest {largest}: {built.files[largest] / 1e6:.2f} MB) -> {built.index}"
    )
    parent = read_json(MLFLOW_RUNS_JSON)["parent"]
    if attach(parent, REPORT_DIR, "report"):  # the aggregate run carries the report it summarizes
        print(f"report: logged to MLflow run {parent} (artifact path report/)")
    else:
        print(
            f"warning: {MLFLOW_RUNS_JSON}: MLflow run {parent} is not in {shown_uri(tracking_uri())} (aggregated "
            f"against another store); the report is built but not logged; `dvc repro -f aggregate report` "
            f"logs both here",
            file=sys.stderr,
        )


if __name__ == "__main__":
    run_stage(main, "report.py")
