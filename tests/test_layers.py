"""The package's layers (docs/design.md section 9): each module's imports, read with ``ast`` (those
inside functions too), may point only to its own layer or lower ones, no modules import each other
in a circle, and no two subpackages import each other (counting every module inside each). The files
design.md's "Where to look" names exist."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gridmix"

# Lowest first, the one declaration of the layer order: each layer a subpackage, but for the public
# API's (gridmix/__init__.py) and the command's entry (__main__). A module belongs to the layer of
# the longest prefix that names it.
LAYERS = [
    ("core", ("gridmix.core",)),
    ("mixers", ("gridmix.mixers",)),
    ("models", ("gridmix.models",)),
    ("tracks", ("gridmix.tracks",)),
    ("study", ("gridmix.study",)),
    ("analysis", ("gridmix.analysis",)),
    ("report", ("gridmix.report",)),
    ("orchestrate", ("gridmix.orchestrate",)),
    ("cli", ("gridmix.cli", "gridmix.__main__")),
    ("api", ("gridmix",)),
]


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that the module ``name`` (its file ``path``) imports, at any depth of the
    file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x / from ..y import z
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {d for d in found if d in known and d != name and not name.startswith(d + ".")}


def graph(found: dict[str, Path]) -> dict[str, set[str]]:
    known = set(found)
    return {name: imports(name, path, known) for name, path in found.items()}


def layer_of(module: str) -> int:
    best = max(
        (
            (len(prefix), index)
            for index, (_, prefixes) in enumerate(LAYERS)
            for prefix in prefixes
            if module == prefix or module.startswith(prefix + ".")
        ),
        default=None,
    )
    if best is None:
        raise KeyError(f"{module} is in no layer of {[name for name, _ in LAYERS]}")
    return best[1]


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
        for a, targets in edges.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    )


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def subpackage_pairs(edges: dict[str, set[str]], root: Path = PACKAGE) -> list[tuple[str, str]]:
    """The pairs of the package's subpackages (its folders) that import each other, any module of
    one importing any module of the other."""
    folders = {path.parent.name for path in root.glob("*/__init__.py")}

    def folder(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in folders else None

    imported = {(folder(a), folder(b)) for a, targets in edges.items() for b in targets}
    return sorted((a, b) for a, b in imported if a and b and a < b and (b, a) in imported)


def test_every_module_is_in_a_layer():
    for name in modules():
        layer_of(name)


def test_no_module_imports_a_higher_layer():
    assert upward_imports(graph(modules())) == []


def test_no_modules_import_each_other_in_a_circle():
    assert circles(graph(modules())) == []


def test_no_two_subpackages_import_each_other():
    assert subpackage_pairs(graph(modules())) == []


def test_a_layer_names_subpackages_and_top_level_modules_never_a_file_inside_a_subpackage():
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            path = PACKAGE.parent / prefix.replace(".", "/")
            top_level = prefix == "gridmix" or (
                prefix.count(".") == 1 and path.with_suffix(".py").exists()
            )
            assert top_level or (path / "__init__.py").exists(), f"layer {name}: {prefix}"


def test_the_checks_catch_a_circle_and_an_upward_import(tmp_path):
    package = tmp_path / "gridmix"
    (package / "tracks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tracks" / "__init__.py").write_text("")
    # inside a function
    (package / "tracks" / "contract.py").write_text("def f():\n    from gridmix.cli import app\n")
    (package / "cli.py").write_text(
        "from gridmix.tracks import contract\nfrom gridmix.core.grid import Grid\n"
    )
    (package / "core").mkdir()
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "grid.py").write_text("from ..tracks import contract\n")  # relative
    edges = graph(modules(package))
    assert upward_imports(edges) == [
        "gridmix.core.grid (core) imports gridmix.tracks.contract (tracks)",
        "gridmix.tracks.contract (tracks) imports gridmix.cli (cli)",
    ]
    assert circles(edges) == [["gridmix.cli", "gridmix.core.grid", "gridmix.tracks.contract"]]
    (package / "study").mkdir()
    (package / "study" / "__init__.py").write_text("")
    (package / "study" / "harness.py").write_text("from gridmix.tracks import contract\n")
    # folders, not a circle
    (package / "tracks" / "registry.py").write_text("import gridmix.study.harness\n")
    edges = graph(modules(package))
    assert subpackage_pairs(edges, package) == [("study", "tracks")]
    with pytest.raises(KeyError, match="gridmix_extra is in no layer"):
        layer_of("gridmix_extra")


def test_every_file_design_md_names_under_where_to_look_exists():
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    section = design.split("## 10. Where to look", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`gridmix/" in line]
    named = [line.split("`")[1] for line in rows]  # the first code span of each row: its file
    assert len(named) == 4, named  # the mixer contract, the verdict, report.md, a track's models
    missing = [path for path in named if not (PACKAGE.parent / path).is_file()]
    assert not missing, f"docs/design.md 'Where to look' names files that do not exist: {missing}"
