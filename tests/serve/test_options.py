"""`asr-pipeline serve`'s settings: each flag's default is its ``ServeOptions`` field's, and a limit that is not
positive is refused naming the flag (before anything loads)."""

from __future__ import annotations

import pytest

from asr_pipeline.cli import build_parser, main
from asr_pipeline.serve.options import ServeOptions


def test_the_serve_flags_default_to_the_options_fields():
    args = build_parser().parse_args(["serve", "--run-dir", "run"])
    defaults = ServeOptions()
    for field in ("max_upload_mb", "max_duration_sec", "max_decoded_mb", "upload_max_age_sec"):
        assert getattr(args, field) == getattr(defaults, field), field
    assert defaults.max_decoded_mb == 256.0


@pytest.mark.parametrize(
    ("flag", "value", "parsed"),
    [
        ("--max-decoded-mb", "0", "0.0"),
        ("--max-duration-sec", "-5", "-5.0"),
        ("--upload-max-age-sec", "0", "0"),
    ],
)
def test_a_limit_that_is_not_positive_is_refused_naming_the_flag(tmp_path, capsys, flag, value, parsed):
    assert main(["serve", "--run-dir", str(tmp_path), flag, value]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"asr-pipeline serve: error: {flag} must be > 0, got {parsed}"
    ]
