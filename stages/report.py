"""report: a static HTML report (results/report/index.html) that opens from disk, no server."""

from evaltrail.config import load_params
from evaltrail.report import REPORT_DIR, build_report
from evaltrail.stage import run_stage


def main() -> None:
    built = build_report(load_params(), REPORT_DIR)
    largest = max(built.files, key=built.files.get)
    print(f"report: {len(built.files)} files, {built.total_bytes / 1e6:.2f} MB "
          f"(largest {largest}: {built.files[largest] / 1e6:.2f} MB) -> {built.index}")


if __name__ == "__main__":
    run_stage(main, "report.py")
