"""benchmarks/demo_recipe.py's frontier (issue 35): each arm's dev CER at equal CPU-minutes, linear between its
epochs, from the rows the script records."""

from __future__ import annotations

import pytest

from .conftest import imported_script


@pytest.fixture
def recipe(monkeypatch):
    yield from imported_script(monkeypatch, "demo_recipe")


def row(arm, cers, epoch_seconds, cpu_seconds):
    return {"arm": arm, "set": [], "val_cer": cers, "epoch_seconds": epoch_seconds, "wall_seconds": 0,
            "cpu_seconds": cpu_seconds, "load_average": 0.0}  # fmt: skip


def test_cpu_seconds_are_shared_out_over_the_epochs_by_their_wall_time(recipe):
    minutes = recipe.cpu_minutes_by_epoch(row("a", [80, 40], [100, 300], 1200))
    assert minutes == pytest.approx([5.0, 20.0])


def test_the_cer_between_two_epochs_is_interpolated_and_none_outside_the_run(recipe):
    arm = row("a", [80, 40], [100, 300], 1200)  # epochs end at 5 and 20 CPU-minutes
    assert recipe.cer_at(arm, 12.5) == pytest.approx(60.0)
    assert recipe.cer_at(arm, 5.0) == pytest.approx(80.0)
    assert recipe.cer_at(arm, 4.0) is None
    assert recipe.cer_at(arm, 21.0) is None


def test_the_frontier_compares_arms_at_the_same_marks_up_to_the_longest_run(recipe):
    cheap = row("cheap", [60, 30], [60, 60], 240)  # 2 and 4 CPU-minutes
    dear = row("dear", [50, 20], [120, 120], 480)  # 4 and 8
    marks = recipe.frontier([cheap, dear], marks=4)
    assert [m for m, _ in marks] == pytest.approx([2.0, 4.0, 6.0, 8.0])
    assert marks[1][1] == {"cheap": pytest.approx(30.0), "dear": pytest.approx(50.0)}
    assert marks[3][1]["cheap"] is None and marks[3][1]["dear"] == pytest.approx(20.0)


def test_the_table_marks_the_default_arm_and_the_best_at_each_mark(recipe, capsys):
    recipe.print_tables([row("base", [60, 30], [60, 60], 240), row("alt", [50, 20], [60, 60], 240)], "base")
    out = capsys.readouterr().out
    assert "| CPU min | base* | alt | best |" in out
    assert out.rstrip().endswith("| 4.0 | 30.00 | 20.00 | alt |")
