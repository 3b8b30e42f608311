"""``decoding.run_resources``: a run knows its lexicon and KenLMs as it knows its tokenizer -- its own copy, the
paths recorded when ``asr-pipeline train`` started it, or its project's stage outputs when it was trained with
that project's tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from asr_pipeline.decoding.run_resources import (
    DECODING_FILE,
    LEXICON_FILE,
    default_decoder,
    run_decoding_resources,
    training_decoding_files,
)
from asr_pipeline.run_layout import TOKENIZER_FILE
from tests.conftest import PROJECT_ROOT


def tokenizer_folder(folder: Path, model: bytes = b"spm-model") -> Path:
    """The tokenizer stage's layout: tokenizer.model with lexicon.txt beside it."""
    folder.mkdir(parents=True)
    (folder / "tokenizer.model").write_bytes(model)
    (folder / LEXICON_FILE).write_text("cat\t\u2581c a t\n")
    return folder / "tokenizer.model"


def test_train_copies_the_lexicon_beside_the_tokenizer_and_records_the_validation_lm(tmp_path):
    tokenizer = tokenizer_folder(tmp_path / "tok")
    (tmp_path / "lm.binary").write_bytes(b"kenlm")

    files = training_decoding_files(tokenizer, lm=tmp_path / "lm.binary", lm_kind="word")

    assert files[LEXICON_FILE] == (tmp_path / "tok" / LEXICON_FILE).read_bytes()
    assert json.loads(files[DECODING_FILE]) == {
        "lexicon": str((tmp_path / "tok" / LEXICON_FILE).resolve()),
        "word_lm": str((tmp_path / "lm.binary").resolve()),
        "token_lm": None,
    }
    assert (
        training_decoding_files(tmp_path / "elsewhere" / "tokenizer.model") == {}
    )  # nothing known: no files


def test_a_run_reads_its_own_lexicon_and_the_lm_recorded_at_training(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "lm.binary").write_bytes(b"kenlm")
    for name, data in training_decoding_files(
        tokenizer_folder(tmp_path / "tok"), lm=tmp_path / "lm.binary", lm_kind="word"
    ).items():
        (run_dir / name).write_bytes(data)

    resources, origin = run_decoding_resources(run_dir)

    assert (resources.lexicon, resources.word_lm, resources.token_lm) == (
        run_dir / LEXICON_FILE,
        (tmp_path / "lm.binary").resolve(),
        None,
    )
    assert origin == {"lexicon": "run dir", "word_lm": "recorded at training"}
    assert default_decoder(resources) == ("lexicon", None)


def project_with_a_stage_run(root: Path, run_tokenizer: bytes) -> Path:
    """A project (its conf/base) whose tokenizer and lm stages ran, and a train-stage run trained with
    ``run_tokenizer``."""
    shutil.copytree(PROJECT_ROOT / "conf" / "base", root / "conf" / "base")
    tokenizer_folder(root / "data" / "03_tokenizer", model=b"the project's tokenizer")
    (root / "data" / "06_lm").mkdir(parents=True)
    (root / "data" / "06_lm" / "lm.binary").write_bytes(b"word kenlm")
    (root / "data" / "06_lm" / "tokens_lm.binary").write_bytes(b"piece kenlm")
    run_dir = root / "data" / "07_train" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / TOKENIZER_FILE).write_bytes(run_tokenizer)
    return run_dir


def test_a_stage_run_finds_its_projects_lexicon_and_lms_by_the_catalog(tmp_path):
    run_dir = project_with_a_stage_run(tmp_path, run_tokenizer=b"the project's tokenizer")

    resources, origin = run_decoding_resources(run_dir)

    assert resources.lexicon == tmp_path / "data" / "03_tokenizer" / LEXICON_FILE
    assert resources.word_lm == tmp_path / "data" / "06_lm" / "lm.binary"
    assert resources.token_lm == tmp_path / "data" / "06_lm" / "tokens_lm.binary"
    assert set(origin.values()) == {"project catalog"}


def test_a_run_of_another_tokenizer_takes_nothing_from_the_project_and_decodes_lexicon_free(tmp_path):
    run_dir = project_with_a_stage_run(tmp_path, run_tokenizer=b"a tokenizer trained elsewhere")

    resources, origin = run_decoding_resources(run_dir)

    assert (resources.lexicon, resources.word_lm, resources.token_lm, origin) == (None, None, None, {})
    decoder, note = default_decoder(resources)
    assert decoder == "lexicon_free" and note.startswith("the run has no lexicon (--lexicon)")
