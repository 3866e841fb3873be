"""dvc.yaml's code deps are each stage's imports: editing a module a stage runs makes `dvc status` see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltrail.errors import EvaltrailError
from evaltrail.provenance.deps import FIX, code_deps, drift, imported_files, write

from .conftest import ROOT


def test_stage_deps_cover_every_module_the_stage_imports():
    lacking = [str(d) for d in drift(ROOT) if d.lacking]
    assert not lacking, "\n".join(lacking) + f"\nits results would go stale unseen: run `{FIX}`"


def test_stage_deps_list_no_module_the_stage_does_not_import():
    extra = [str(d) for d in drift(ROOT) if not d.lacking]
    assert not extra, "\n".join(extra) + f"\nediting those re-runs it for nothing: run `{FIX}`"


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# A stage importing a package through every form the closure must follow.
PACKAGE = {
    "stages/run.py": "import os\nfrom evaltrail import a\nfrom evaltrail.tools.fmt import pretty\n",
    "src/evaltrail/__init__.py": "",
    "src/evaltrail/a.py": "from . import b\n",  # a submodule, not a name of the package
    "src/evaltrail/b.py": "from .c import g\n\ndef f():\n    from .backends.fast import run\n",  # lazy
    "src/evaltrail/c.py": "def g():\n    pass\n",
    "src/evaltrail/backends/__init__.py": "",
    "src/evaltrail/backends/fast.py": "from ..plugins import registry\n",  # `from ..pkg import sub`
    "src/evaltrail/backends/slow.py": "",  # never imported
    "src/evaltrail/plugins/__init__.py": (
        "import importlib, pkgutil\n\ndef _discover():\n"
        "    for m in pkgutil.iter_modules(__path__):\n"
        "        importlib.import_module(f'{__name__}.{m.name}')\n\n_discover()\n"
    ),
    "src/evaltrail/plugins/registry.py": "",
    "src/evaltrail/plugins/extra.py": "",  # imported only by the discovery loop
    # only the parent of tools.fmt: its body runs, its functions (and their lazy imports) cannot
    "src/evaltrail/tools/__init__.py": "def cli():\n    from ..heavy import everything\n",
    "src/evaltrail/tools/fmt.py": "def pretty():\n    pass\n",
    "src/evaltrail/tools/words.json": "[]",  # package data, read via importlib.resources
    "src/evaltrail/heavy.py": "",
    "src/evaltrail/unused.py": "",
}


def test_closure_follows_relative_lazy_submodule_and_discovered_imports(tmp_path):
    assert imported_files("stages/run.py", tree(tmp_path, PACKAGE)) == [
        "src/evaltrail/__init__.py",
        "src/evaltrail/a.py",
        "src/evaltrail/b.py",
        "src/evaltrail/backends/__init__.py",
        "src/evaltrail/backends/fast.py",
        "src/evaltrail/c.py",
        "src/evaltrail/plugins/__init__.py",
        "src/evaltrail/plugins/extra.py",
        "src/evaltrail/plugins/registry.py",
        "src/evaltrail/tools/__init__.py",
        "src/evaltrail/tools/fmt.py",
        "src/evaltrail/tools/words.json",
    ]


def test_a_package_imported_by_name_brings_its_lazy_imports(tmp_path):
    root = tree(tmp_path, {**PACKAGE, "stages/run.py": "from evaltrail.tools import cli\n"})
    assert "src/evaltrail/heavy.py" in imported_files("stages/run.py", root)


def test_code_deps_name_a_directory_only_when_every_file_in_it_is_imported(tmp_path):
    assert code_deps("stages/run.py", tree(tmp_path, PACKAGE)) == [
        "stages/run.py",
        "src/evaltrail/__init__.py",
        "src/evaltrail/a.py",
        "src/evaltrail/b.py",
        "src/evaltrail/backends/__init__.py",  # not slow.py: not the directory
        "src/evaltrail/backends/fast.py",
        "src/evaltrail/c.py",
        "src/evaltrail/plugins",
        "src/evaltrail/tools",
    ]


def test_an_import_of_a_missing_module_fails_by_name(tmp_path):
    root = tree(tmp_path, {**PACKAGE, "src/evaltrail/c.py": "from .gone import f\n"})
    with pytest.raises(EvaltrailError, match=r"src/evaltrail/c.py: imports evaltrail.gone, which is no module"):
        imported_files("stages/run.py", root)


DVC_YAML = """\
stages:
  run:
    foreach: ${items}
    do:
      cmd: python stages/run.py ${item}
      deps:
        - stages/run.py
        - data/raw/${item}  # the inputs
        - src/evaltrail/unused.py
        - src/evaltrail/a.py  # why a
      outs:
        - out/${item}
"""


def test_write_rewrites_code_deps_and_keeps_data_deps_and_comments(tmp_path):
    root = tree(tmp_path, {**PACKAGE, "dvc.yaml": DVC_YAML})
    assert {(d.path, d.lacking) for d in drift(root)} >= {
        ("src/evaltrail/plugins", True),
        ("src/evaltrail/unused.py", False),
    }
    assert write(root) == ["run"]
    assert drift(root) == [] and write(root) == []
    text = (root / "dvc.yaml").read_text()
    assert "        - data/raw/${item}  # the inputs\n" in text
    assert "        - src/evaltrail/a.py  # why a\n" in text
    assert "unused" not in text
    assert text.endswith("      outs:\n        - out/${item}\n")
