"""Recipes run one iteration per DVC stage (``foreach`` over ``params.yaml <section>.iterations``): DVC passes
the iteration as ``--params=<section>.current=<iteration>`` (a Kedro runtime parameter), so one pipeline
serves every iteration and each stage tracks only its own iteration's params."""

from __future__ import annotations

from typing import Any


def iteration_params(
    params: dict[str, Any], section: str, pipeline: str, entries: str = "iterations"
) -> tuple[str, dict[str, Any]]:
    """The iteration this run is for (``<section>.current``) and its entry of ``<section>.<entries>``."""
    iterations = params.get(entries) or {}
    current = params.get("current")
    if current is None:
        raise ValueError(
            f"{section}.current is not set: run one iteration with `kedro run --pipelines={pipeline} "
            f"--params={section}.current=<name>` ({entries}: {', '.join(iterations) or 'none'})"
        )
    if current not in iterations:
        raise ValueError(
            f"{section}.current={current!r} is not one of {section}.{entries}: {', '.join(iterations)}"
        )
    return current, iterations[current] or {}


__all__ = ["iteration_params"]
