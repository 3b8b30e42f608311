import stat
import sys

import kenlm
import pytest

from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm, find_kenlm_tool

from .factories import LM_CORPUS


@pytest.mark.parametrize("binary_type", ["probing", "trie"])
def test_build_kenlm_returns_an_arpa_and_a_binary_of_the_same_model(tmp_path, binary_type):
    arpa, binary = build_kenlm(LM_CORPUS, KenLMOptions(order=3, binary_type=binary_type))
    assert arpa.lstrip().startswith("\\data\\")
    assert "ngram 3=" in arpa
    (tmp_path / "lm.arpa").write_text(arpa, encoding="utf-8")
    (tmp_path / "lm.bin").write_bytes(binary)

    from_arpa, from_binary = kenlm.Model(str(tmp_path / "lm.arpa")), kenlm.Model(str(tmp_path / "lm.bin"))
    assert from_arpa.order == from_binary.order == 3
    in_corpus, shuffled = "the cat sat on the mat", "mat the on sat cat the"
    assert from_arpa.score(in_corpus) > from_arpa.score(shuffled) + 3  # over 1000x more likely
    # The binary stores the same probabilities (probing exactly; trie quantises nothing by default).
    assert from_binary.score(in_corpus) == pytest.approx(from_arpa.score(in_corpus), abs=1e-4)


def test_pruning_drops_singleton_higher_order_ngrams():
    full, _ = build_kenlm(LM_CORPUS, KenLMOptions(order=3))
    pruned, _ = build_kenlm(LM_CORPUS, KenLMOptions(order=3, prune=(0, 0, 1)))

    def trigram_count(arpa: str) -> int:
        return int(next(line for line in arpa.splitlines() if line.startswith("ngram 3=")).split("=")[1])

    assert trigram_count(pruned) < trigram_count(full)


def test_missing_tools_say_to_run_make_setup(tmp_path, monkeypatch):
    # Nothing next to the interpreter and nothing on PATH.
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"'lmplz' not found .* run `make setup`"):
        build_kenlm(LM_CORPUS, KenLMOptions())


def test_tools_next_to_the_interpreter_are_preferred_over_path(tmp_path, monkeypatch):
    venv_bin, elsewhere = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    for folder in (venv_bin, elsewhere):
        folder.mkdir(parents=True)
        tool = folder / "lmplz"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(elsewhere))
    assert find_kenlm_tool("lmplz") == str(venv_bin / "lmplz")
    assert find_kenlm_tool("lmplz", explicit=str(elsewhere / "lmplz")) == str(elsewhere / "lmplz")


def test_an_explicit_tool_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope/lmplz"):
        build_kenlm(LM_CORPUS, KenLMOptions(), lmplz=str(tmp_path / "nope" / "lmplz"))


def test_a_failing_tool_reports_its_stderr(tmp_path):
    broken = tmp_path / "lmplz"
    broken.write_text("#!/bin/sh\necho 'lmplz: something specific went wrong' >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(RuntimeError, match=r"(?s)exit code 3.*something specific went wrong"):
        build_kenlm(LM_CORPUS, KenLMOptions(), lmplz=str(broken))


def test_an_empty_corpus_is_rejected():
    with pytest.raises(ValueError, match="corpus is empty"):
        build_kenlm("\n\n", KenLMOptions())


@pytest.mark.parametrize("prune", [(1,), (0, 2, 1), (0, 0, 0, 0)])
def test_options_reject_pruning_lmplz_cannot_do(prune):
    with pytest.raises(ValueError, match="prune"):
        KenLMOptions(order=3, prune=prune)
