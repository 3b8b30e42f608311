"""Build a word n-gram LM with KenLM's command-line tools (used by the `lm` pipeline stage).

The kenlm wheel on PyPI ships only the query module; ``lmplz`` (estimation, modified Kneser-Ney) and
``build_binary`` (the fast mmap-able format) are compiled from the kenlm sdist by ``scripts/setup.sh``
(``make setup``) into the virtualenv's ``bin/``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class KenLMOptions:
    """lmplz/build_binary settings.

    ``prune`` holds one count threshold per order (lmplz ``--prune``; n-grams seen at most that often
    are dropped, the last value applies to higher orders); lmplz cannot prune unigrams, so the first
    value must be 0. ``discount_fallback`` lets lmplz estimate small or deduplicated corpora (e.g. the
    demo corpus), whose count-of-counts break the closed-form Kneser-Ney discounts. ``memory`` is lmplz's
    sorting memory (``-S``, GNU sort syntax). ``binary_type`` is "probing" (fastest) or "trie" (smallest).
    """

    order: int = 3
    prune: tuple[int, ...] = ()
    discount_fallback: bool = True
    memory: str = "20%"
    binary_type: str = "probing"

    def __post_init__(self) -> None:
        if self.order < 1:
            raise ValueError(f"order must be >= 1, got {self.order}")
        if self.prune:
            if len(self.prune) > self.order:
                raise ValueError(f"prune has {len(self.prune)} thresholds for an order-{self.order} model")
            if self.prune[0] != 0 or any(b < a for a, b in zip(self.prune, self.prune[1:], strict=False)):
                raise ValueError(
                    f"prune={self.prune} must start with 0 (lmplz cannot prune unigrams) and never decrease"
                )
        if self.binary_type not in ("probing", "trie"):
            raise ValueError(f"binary_type must be 'probing' or 'trie', got {self.binary_type!r}")


def find_kenlm_tool(name: str, explicit: str | None = None) -> str:
    """Path of a KenLM tool: ``explicit`` if given, else the virtualenv's bin, else ``PATH``."""
    if explicit is not None:
        resolved = explicit if Path(explicit).is_file() else shutil.which(explicit)
        if resolved is None:
            raise FileNotFoundError(f"KenLM tool {name!r} not found at {explicit!r}")
        return resolved
    # Not resolved through symlinks: a venv's python links to the base interpreter, but its bin/ is ours.
    beside_python = Path(sys.executable).parent / name
    if beside_python.is_file():
        return str(beside_python)
    on_path = shutil.which(name)
    if on_path is None:
        raise FileNotFoundError(
            f"KenLM tool {name!r} not found next to {sys.executable} nor on PATH; run `make setup` "
            "(scripts/setup.sh builds lmplz and build_binary into the virtualenv)"
        )
    return on_path


def _run(command: list[str], cwd: Path) -> None:
    try:
        subprocess.run(command, check=True, capture_output=True, cwd=cwd)
    except subprocess.CalledProcessError as error:
        stderr = error.stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL_CHARS:]
        raise RuntimeError(
            f"{Path(command[0]).name} failed with exit code {error.returncode}: {' '.join(command)}\n{stderr}"
        ) from error


def build_kenlm(
    corpus_text: str,
    options: KenLMOptions,
    lmplz: str | None = None,
    build_binary: str | None = None,
) -> tuple[str, bytes]:
    """Estimate an n-gram LM from ``corpus_text`` (one normalised sentence per line).

    Returns the ARPA text and the ``build_binary`` bytes of the same model.
    """
    lmplz_path = find_kenlm_tool("lmplz", lmplz)
    build_binary_path = find_kenlm_tool("build_binary", build_binary)
    if not corpus_text.strip():
        raise ValueError("the LM corpus is empty; the transcript corpus must hold one sentence per line")

    with tempfile.TemporaryDirectory(prefix="kenlm-") as tmp:
        workdir = Path(tmp)
        (workdir / "corpus.txt").write_text(
            corpus_text if corpus_text.endswith("\n") else corpus_text + "\n", encoding="utf-8"
        )
        estimate = [
            lmplz_path,
            "--order", str(options.order),
            "--memory", options.memory,
            "--temp_prefix", str(workdir) + "/",
            "--text", "corpus.txt",
            "--arpa", "model.arpa",
        ]  # fmt: skip
        if options.prune:
            estimate += ["--prune", *map(str, options.prune)]
        if options.discount_fallback:
            estimate.append("--discount_fallback")
        _run(estimate, workdir)
        convert = [build_binary_path]
        if options.binary_type == "trie":  # only the trie sorts on disk; give it the same memory cap
            convert += ["-S", options.memory, "-T", str(workdir) + "/"]
        _run([*convert, options.binary_type, "model.arpa", "model.bin"], workdir)
        return (workdir / "model.arpa").read_text(encoding="utf-8"), (workdir / "model.bin").read_bytes()


__all__ = ["KenLMOptions", "build_kenlm", "find_kenlm_tool"]
