"""Imports inside ``asr_pipeline`` point one way: a torch-free spec owns its config and sizes, the model file
imports them, a package's ``__init__`` re-exports its submodules and none of them imports it back, and nothing
imports back, not even under ``TYPE_CHECKING`` or inside a function. A spec names its builder by import path (a
string), which is no import."""

from __future__ import annotations

import ast
from pathlib import Path

import asr_pipeline

SOURCE = Path(asr_pipeline.__file__).parent


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` (the module named ``module``) imports anywhere in its body;
    ``from pkg import name`` counts as an import of ``pkg`` (its ``__init__`` runs) and of ``pkg.name`` when
    that is a module; relative imports are resolved against the module's package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found & known


def import_graph(package_dir: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    modules = {
        f"{package}.{path.relative_to(package_dir).with_suffix('').as_posix().replace('/', '.')}".removesuffix(
            ".__init__"
        ): path
        for path in package_dir.rglob("*.py")
    }
    return {name: imported_modules(path, name, set(modules)) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_cycles_finds_a_spec_and_model_importing_each_other(tmp_path):
    (tmp_path / "toy_spec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.toy import ToyConfig\n"
    )
    (tmp_path / "toy.py").write_text("from pkg.toy_spec import SIZES\n")
    (tmp_path / "other.py").write_text("def build():\n    from pkg import toy\n")

    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.toy", "pkg.toy_spec"]]


def test_cycles_finds_a_submodule_importing_its_package_init(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("from . import corpus\n")
    (tmp_path / "sub" / "words.py").write_text("WORDS = []\n")
    (tmp_path / "sub" / "shapes.py").write_text("from pkg.sub import words\n")
    (tmp_path / "sub" / "corpus.py").write_text("from ..sub.shapes import SHAPES\n")

    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.sub", "pkg.sub.corpus", "pkg.sub.shapes"]]


def test_a_leaf_module_imported_by_path_makes_no_cycle(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("from .shapes import SHAPES\n")
    (tmp_path / "sub" / "words.py").write_text("WORDS = []\n")
    (tmp_path / "sub" / "shapes.py").write_text(
        "import pkg.sub.words as words\nfrom pkg.sub.words import WORDS\n"
    )

    assert cycles(import_graph(tmp_path, "pkg")) == []


def test_no_module_of_the_package_imports_one_that_imports_it_back():
    graph = import_graph(SOURCE, "asr_pipeline")

    assert cycles(graph) == [], "modules that import each other (directly or round a loop)"
