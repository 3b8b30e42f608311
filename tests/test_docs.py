"""The documents a person reads: the README stays short and points only into the repository, and the MkDocs
site in docs/ builds with ``mkdocs build --strict`` (a broken link or anchor, or a page missing from the nav,
fails it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def copy_docs(dest: Path) -> Path:
    """mkdocs.yml and docs/ copied to ``dest``, so a test can break a page without touching the tree."""
    shutil.copy(PROJECT_ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(PROJECT_ROOT / "docs", dest / "docs")
    return dest / "mkdocs.yml"


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_readme_is_at_most_250_lines_and_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()

    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference text into docs/"
    commands = [line.split("#")[0].strip() for line in lines[2:6]]
    assert commands[:3] == ["```bash", "make demo", "make test"], lines[:6]


def test_every_link_in_the_readme_stays_in_the_repository_and_exists():
    links = MARKDOWN_LINK.findall(README.read_text(encoding="utf-8"))
    local = [link.split("#")[0] for link in links if not link.startswith(("http://", "https://"))]

    assert local, "the README links into docs/"
    for link in local:
        target = (PROJECT_ROOT / link).resolve()
        assert target.is_relative_to(PROJECT_ROOT), f"README.md points outside the repository: {link}"
        assert target.exists(), f"README.md links to a missing file: {link}"


def test_the_docs_site_builds_strict(tmp_path):
    result = mkdocs_build(copy_docs(tmp_path), tmp_path / "site")

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "train-flags" / "index.html").is_file()
    assert (tmp_path / "site" / "results" / "kernels" / "index.html").is_file()


@pytest.mark.parametrize(
    ("link", "what"),
    [
        ("[gone](no-such-page.md)", "a missing page"),
        ("[gone](training.md#no-such-section)", "a missing anchor"),
    ],
)
def test_the_strict_build_fails_on_a_broken_internal_link(tmp_path, link, what):
    config = copy_docs(tmp_path)
    page = tmp_path / "docs" / "cli.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nSee {link}.\n", encoding="utf-8")

    result = mkdocs_build(config, tmp_path / "site")

    assert result.returncode != 0, f"{what} passed the strict build"
    assert "cli.md" in result.stderr


def test_the_readme_figures_of_the_demo_corpus_are_the_codes():
    import yaml

    from asr_pipeline.demo.corpus import DemoCorpusParams
    from asr_pipeline.demo.sentences import SHAPES, VOCABULARY
    from asr_pipeline.demo.synthesis import SAMPLE_RATE

    row = next(
        line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `demo_corpus`")
    )
    figures = re.search(
        r"~(?P<train>[\d,]+)/(?P<dev>[\d,]+)/(?P<test>[\d,]+) English utterances .* from a (?P<shapes>\d+)-shape "
        r"grammar over ~(?P<words>[\d,]+) everyday words, at (?P<slow>\d+)-(?P<fast>\d+) words per minute"
        r".*, (?P<khz>[\d.]+) kHz WAV",
        row,
    )
    assert figures, row
    number = {key: float(value.replace(",", "")) for key, value in figures.groupdict().items()}
    params = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text(encoding="utf-8"))["demo_corpus"]

    assert (number["train"], number["dev"], number["test"]) == (
        params["train_size"],
        params["dev_size"],
        params["test_size"],
    )
    assert number["shapes"] == len(SHAPES)
    assert number["words"] == round(len(VOCABULARY), -2)
    assert (number["slow"], number["fast"]) == DemoCorpusParams.from_dict(params).rate_wpm
    assert number["khz"] * 1000 == SAMPLE_RATE
