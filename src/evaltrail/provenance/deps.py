"""Code deps derived from imports: the evaltrail files each stage's script may run or read.

dvc.yaml lists them so that editing any of them makes `dvc status` report the stage changed.
`evaltrail deps --check` names what a stage's deps lack or list needlessly; `--write` rewrites them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML

from ..errors import EvaltrailError

PACKAGE = "evaltrail"
SRC = "src"
DVC_YAML = "dvc.yaml"
FIX = "evaltrail deps --write"
_SCRIPT = re.compile(r"\bstages/[\w-]+\.py\b")


def _is_code(dep: str) -> bool:
    return dep.startswith(("stages/", f"{SRC}/"))


def _tree(directory: Path) -> set[Path]:
    """The files under `directory` as a DVC directory dep hashes them (.dvcignore skips __pycache__)."""
    return {p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(directory).parts}


def _module_file(root: Path, name: str) -> Path | None:
    base = root / SRC / Path(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _package_data(package: Path) -> set[Path]:
    """The non-Python files a package ships (read via importlib.resources), outside its subpackages."""
    return {
        p
        for p in _tree(package)
        if p.suffix != ".py" and next(d for d in p.parents if (d / "__init__.py").is_file()) == package
    }


def _discovers(node: ast.AST) -> bool:
    """`pkgutil.iter_modules(__path__)`: the package imports each of its modules at run time."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "iter_modules"
        and bool(node.args)
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "__path__"
    )


def _nodes(tree: ast.AST, on_import: bool) -> Iterator[ast.AST]:
    """Every node; with on_import, only those Python runs when it imports the module (no function bodies)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not (on_import and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
            todo.extend(ast.iter_child_nodes(node))


def _imports(root: Path, path: Path, package: str | None, on_import: bool) -> set[tuple[str, bool]]:
    """(module, must exist) for each import in `path`; `package` resolves relative ones."""
    where = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), where)
    found: set[tuple[str, bool]] = set()
    for node in _nodes(tree, on_import):
        if isinstance(node, ast.Import):  # `import a.b` binds `a`: code can call into a's __init__ too
            found |= {
                (".".join(parts[:i]), True)
                for alias in node.names
                for parts in [alias.name.split(".")]
                for i in range(1, len(parts) + 1)
            }
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = (package or "").split(".")
                if package is None or node.level > len(parts):
                    raise EvaltrailError(f"{where}:{node.lineno}: relative import beyond the top-level package")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add((base, True))
            # `from pkg import name` imports the submodule pkg.name when there is one
            found |= {(f"{base}.{alias.name}", False) for alias in node.names if alias.name != "*"}
    # discovery runs on import (the idiom calls it at module level), so look for it in functions too
    if path.name == "__init__.py" and any(_discovers(node) for node in ast.walk(tree)):
        found |= {
            (f"{package}.{p.stem}", True)
            for p in path.parent.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
        }
    return found


def imported_files(script: str, root: Path | str = ".") -> list[str]:
    """Sorted repo-relative paths of the evaltrail files `script` imports, transitively.

    Imports inside functions count (lazy ones pick optional backends), except in a package's
    __init__.py that only runs as the parent of the module named, as in `from pkg.sub import x`:
    none of its functions can be called then. Every enclosing package's __init__.py counts
    (Python runs it), and so do a package's data files."""
    root = Path(root)
    whole: dict[Path, bool] = {}  # file -> whether its function bodies can run, not just its top level
    todo = [root / script]
    while todo:
        path = todo.pop()
        package = ".".join(path.relative_to(root / SRC).parent.parts) if path.is_relative_to(root / SRC) else None
        for name, required in sorted(_imports(root, path, package, on_import=not whole.get(path, True))):
            parts = name.split(".")
            if parts[0] != PACKAGE:
                continue
            for i in range(1, len(parts) + 1):
                file = _module_file(root, ".".join(parts[:i]))
                if file is None:
                    if required:
                        raise EvaltrailError(
                            f"{path.relative_to(root).as_posix()}: imports {name}, which is no module under {SRC}/"
                        )
                    break
                named = i == len(parts)
                if file not in whole or (named and not whole[file]):  # new, or now wholly reachable
                    whole[file] = named
                    todo.append(file)
    files = set(whole) | {d for p in whole if p.name == "__init__.py" for d in _package_data(p.parent)}
    return sorted(p.relative_to(root).as_posix() for p in files)


def code_deps(script: str, root: Path | str = ".") -> list[str]:
    """A stage's code deps as dvc.yaml lists them: its script, then a directory wherever it needs
    every file in it (exact, and shorter), else each file."""
    return _entries(Path(root), script, imported_files(script, root))


def _entries(root: Path, script: str, files: list[str]) -> list[str]:
    dirs = sorted({p for f in files for p in (root / f).parents if (root / SRC) in p.parents})
    chosen: list[Path] = []
    for d in dirs:  # parents sort before their children: keep the outermost covered directory
        if not any(c in d.parents for c in chosen) and {p.relative_to(root).as_posix() for p in _tree(d)} <= set(files):
            chosen.append(d)
    entries = {c.relative_to(root).as_posix() for c in chosen}
    return [script, *sorted(entries | {f for f in files if not _covered(f, entries)})]


def _covered(file: str, deps: Iterable[str]) -> bool:
    return any(file == d or file.startswith(d + "/") for d in deps)


def _yaml() -> YAML:
    yaml = YAML()  # round-trip: comments, key order and layout survive a rewrite
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    return yaml


def _stages(doc) -> dict:
    """Each stage's body: the `do:` of a foreach template, else the stage itself (also matrix ones)."""
    return {name: stage.get("do", stage) for name, stage in doc["stages"].items()}


def _script(name: str, body) -> str:
    match = _SCRIPT.search(body["cmd"])
    if not match:
        raise EvaltrailError(f"{DVC_YAML}: stages.{name}.cmd: runs no stages/*.py script")
    return match.group()


@dataclass(frozen=True)
class Drift:
    """A code dep dvc.yaml lacks for a stage (its results go stale) or lists needlessly (needless re-runs)."""

    stage: str
    script: str
    path: str
    lacking: bool

    def __str__(self) -> str:
        if self.lacking:
            return f"{DVC_YAML}: {self.stage}: deps lack {self.path}, which {self.script} imports"
        return f"{DVC_YAML}: {self.stage}: deps list {self.path}, more than {self.script} imports"


def drift(root: Path | str = ".") -> list[Drift]:
    """Every code dep that differs from what the stage scripts import, stage by stage."""
    root = Path(root)
    with open(root / DVC_YAML, encoding="utf-8") as f:
        stages = _stages(_yaml().load(f))
    found = []
    for name, body in stages.items():
        script = _script(name, body)
        imported = imported_files(script, root)
        files = {script, *imported}
        listed = [d for d in body["deps"] if _is_code(d)]
        for entry in _entries(root, script, imported):  # a directory wholly missing is one line, not one per file
            under = [f for f in sorted(files) if _covered(f, [entry])]
            lacking = [f for f in under if not _covered(f, listed)]
            found += [Drift(name, script, p, True) for p in ([entry] if lacking == under else lacking)]
        found += [Drift(name, script, d, False) for d in listed if not _covers_only(root, d, files)]
    return found


def _covers_only(root: Path, dep: str, files: set[str]) -> bool:
    """Whether every file the dep stands for (itself, or a directory's files) is one of `files`."""
    path = root / dep
    return all(p.relative_to(root).as_posix() in files for p in (_tree(path) if path.is_dir() else {path}))


def write(root: Path | str = ".") -> list[str]:
    """Rewrite every stage's code deps as derived (script, data deps as they were, then evaltrail files);
    return the stages whose deps changed. Comments on kept entries stay with them."""
    root = Path(root)
    yaml = _yaml()
    with open(root / DVC_YAML, encoding="utf-8") as f:
        doc = yaml.load(f)
    changed = []
    for name, body in _stages(doc).items():
        script = _script(name, body)
        deps = body["deps"]
        derived = code_deps(script, root)
        old = {str(d): deps.ca.items.get(i) for i, d in enumerate(deps)}
        new = [script, *(d for d in deps if not _is_code(d)), *derived[1:]]
        if new == list(deps):
            continue
        changed.append(name)
        deps.clear()
        deps.ca.items.clear()
        for i, d in enumerate(new):
            deps.append(d)
            if old.get(d):
                deps.ca.items[i] = old[d]
    if changed:
        with open(root / DVC_YAML, "w", encoding="utf-8") as f:
            yaml.dump(doc, f)
    return changed
