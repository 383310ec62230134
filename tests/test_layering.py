"""The package layering of docs/architecture.md: no import cycle and no upward import.

Every module of ``reidcli`` is parsed (``ast``, nothing imported): its module-level imports and
its function-local ones (``if TYPE_CHECKING:`` blocks are skipped: they never run).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import reidcli

ROOT = Path(reidcli.__file__).resolve().parent

#: the layers, lowest first (docs/architecture.md): a package imports its own layer and the
#: layers below it, never one above. Top-level modules count as packages of their own name.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("reidcli", "errors", "naming", "params", "numeric", "cameras", "io", "progress", "device",
     "distributed_env", "registry", "provenance", "workers"),
    ("data",),
    ("store",),
    ("synthetic", "models", "pairwise"),
    ("fitted",),
    ("estimator", "estimator_fit"),
    ("features", "metric"),
    ("pooling",),
    ("evaluation",),
    ("training", "adapt", "plotting"),
    ("paper",),
    ("cli", "demo"),
)
RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.Module):
    """``(statement, local)`` for every import statement; ``local``: inside a function."""
    stack = [(node, False) for node in tree.body]
    while stack:
        node, local = stack.pop()
        if _is_type_checking(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, local
            continue
        local = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, local) for child in ast.iter_child_nodes(node))


def _targets(name: str, path: Path, node) -> set[str]:
    """The reidcli modules an import statement of module ``name`` loads."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    out = set()
    for alias in node.names:                      # ``from pkg import submodule`` → submodule
        sub = f"{source}.{alias.name}"
        out.add(sub if sub in MODULES else source)
    return {m for m in out if m in MODULES and m != name}


def _graphs() -> dict[bool, dict[str, set[str]]]:
    """{False: module-level imports only, True: function-local ones too} as module → targets."""
    graphs: dict[bool, dict[str, set[str]]] = {False: {}, True: {}}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_bytes(), str(path))
        graphs[False][name], graphs[True][name] = set(), set()
        for node, local in _imports(tree):
            targets = _targets(name, path, node)
            graphs[True][name] |= targets
            if not local:
                graphs[False][name] |= targets
    return graphs


GRAPHS = _graphs()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@pytest.mark.parametrize("nested", [False, True], ids=["module-level", "with-local-imports"])
def test_no_import_cycle(nested):
    assert _cycles(GRAPHS[nested]) == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_has_a_layer():
    assert {_package(m) for m in MODULES} - set(RANK) == set()


def test_no_package_imports_a_higher_layer():
    upward = sorted(f"{source} imports {target}" for source, targets in GRAPHS[True].items()
                    for target in targets
                    if RANK[_package(target)] > RANK[_package(source)])
    assert upward == []


def test_library_packages_never_import_the_command_line_or_the_evaluation_runs():
    library = ("data", "store", "metric", "pooling", "features", "models")
    banned = ("reidcli.cli", "reidcli.demo", "reidcli.evaluation.engine",
              "reidcli.evaluation.run", "reidcli.paper")
    found = sorted(f"{source} imports {target}" for source, targets in GRAPHS[True].items()
                   if _package(source) in library for target in targets
                   if target.startswith(banned))
    assert found == []
