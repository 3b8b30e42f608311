"""cli.docs: the two generated reference pages (train flags from the parser, our defaults against the
reference trainer's from the config fields) are current, and the command writes a missing or stale page and
``--check`` reports one without writing."""

from __future__ import annotations

import argparse

import pytest

from asr_pipeline.cli import docs
from asr_pipeline.cli.docs import (
    DEFAULTS_PAGE,
    PAGE,
    defaults_rows,
    flag_rows,
    flags_table,
    render_defaults_page,
    render_page,
    train_parser,
)


def test_the_docs_flags_page_is_the_generated_one():
    assert PAGE.read_text(encoding="utf-8") == render_page(), (
        "docs/reference/train-flags.md is out of date: run `python -m asr_pipeline.cli.docs`"
    )


def test_the_docs_defaults_page_is_the_generated_one():
    assert DEFAULTS_PAGE.read_text(encoding="utf-8") == render_defaults_page(), (
        "docs/reference/defaults.md is out of date: run `python -m asr_pipeline.cli.docs`"
    )


def test_the_generated_table_has_one_row_per_option_with_its_aliases():
    table = flags_table()

    assert "| `--lr-warmup-epochs`, `--warmup-epochs` | 20 |" in table
    assert "| `--nnodes` | 1 |" in table, "argparse defaults are stated too"
    assert "| `--dry-run` | off |" in table
    assert "`--help`" not in table
    assert len(table.splitlines()) == 2 + len(flag_rows(train_parser()))


def toy_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stated", type=int, default=3, help="a help default wins (default: three)")
    parser.add_argument("--plain", type=int, default=7, help="argparse's default, 100%% of the time")
    parser.add_argument("--switch", action="store_true", default=None, help="a switch")
    parser.add_argument("--unset", "-u", help="no default | a pipe")
    parser.add_argument("--mode", choices=["a", "b"], help="a choice")
    parser.add_argument("positional")
    return parser


def test_a_rows_default_is_the_stated_one_else_argparses_else_unset_or_off():
    rows = {names: (default, meaning) for names, default, meaning in flag_rows(toy_parser())}

    assert rows == {
        "`--stated`": ("three", "a help default wins"),
        "`--plain`": ("7", "argparse's default, 100% of the time"),
        "`--switch`": ("off", "a switch"),
        "`--unset`, `-u`": ("unset", "no default | a pipe"),
        "`--mode`": ("unset", "a choice; one of `a`, `b`"),
    }, "no -h row, no positional row; %% unescaped; choices appended"


def test_a_pipe_in_a_help_text_is_escaped_so_the_row_keeps_three_cells():
    row = next(line for line in flags_table(toy_parser()).splitlines() if "--unset" in line)

    assert row == "| `--unset`, `-u` | unset | no default \\| a pipe |"


def test_every_defaults_row_names_a_config_key_once_and_tokenizer_rows_their_command():
    rows = defaults_rows()
    keys = [key for key, *_ in rows]

    assert len(keys) == len(set(keys))
    assert any(key.startswith("tokenizer.") for key in keys) and any(key.startswith("optim.") for key in keys)
    for key, flag, _ours, _reference, why in rows:
        if key.startswith("tokenizer.") and flag:
            assert flag.startswith("tokenizer --"), (key, flag)
        assert why, f"{key}: a difference from the reference says why"


@pytest.fixture
def pages(tmp_path):
    """Both pages' paths in tmp_path, as ``--output``/``--defaults-output`` arguments."""
    flags, defaults = tmp_path / "reference" / "train-flags.md", tmp_path / "reference" / "defaults.md"
    return flags, defaults, ["--output", str(flags), "--defaults-output", str(defaults)]


def test_the_docs_command_writes_the_pages_and_check_reports_a_missing_or_stale_one(pages, capsys):
    flags, defaults, paths = pages

    assert docs.main([*paths, "--check"]) == 1, "missing"
    assert "the train flags page is missing; run: python -m asr_pipeline.cli.docs" in capsys.readouterr().out
    assert not flags.exists() and not defaults.exists(), "--check writes nothing"
    assert docs.main(paths) == 0
    assert flags.read_text(encoding="utf-8") == render_page()
    assert defaults.read_text(encoding="utf-8") == render_defaults_page()
    assert docs.main([*paths, "--check"]) == 0
    flags.write_text(render_page().replace("| `--nnodes` | 1 |", "| `--nnodes` | 2 |"), encoding="utf-8")
    capsys.readouterr()
    assert docs.main([*paths, "--check"]) == 1, "stale"
    out = capsys.readouterr().out
    assert f"{flags}: the train flags page is out of date" in out
    assert f"{defaults}: the defaults page is up to date" in out
