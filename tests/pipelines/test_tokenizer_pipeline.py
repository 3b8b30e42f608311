from pathlib import Path

import pytest

from asr_pipeline.pipelines.tokenizer import create_pipeline
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES
from tests.pipelines.conftest import run_stage


def test_tokenizer_stage_writes_a_loadable_model_vocab_and_summary(project_params):
    params = {**project_params["tokenizer"], "vocab_size": 40}
    catalog = run_stage(
        create_pipeline(),
        {"tokenizer_corpus": "\n".join(TINY_SENTENCES) + "\n"},
        params={"tokenizer": params, "transcripts": project_params["transcripts"]},
    )
    tokenizer = CTCTokenizer(catalog.load("tokenizer_model"))
    info = catalog.load("tokenizer_info")
    assert info["vocab_size"] == tokenizer.vocab_size == 41
    assert info["blank_id"] == 0
    assert info["normalization"]["unicode_form"] == "NFKC"
    assert len(catalog.load("tokenizer_vocab").splitlines()) == 40


@pytest.mark.skipif(not Path("/usr/bin/spm_train").is_file(), reason="Debian's spm_train is not installed")
def test_tokenizer_stage_can_train_with_an_external_spm_train(project_params):
    params = {**project_params["tokenizer"], "vocab_size": 40, "sentencepiece_command": "/usr/bin/spm_train"}
    normalization = {"lowercase": False}  # partial params: the summary records every option resolved
    catalog = run_stage(
        create_pipeline(),
        {"tokenizer_corpus": "\n".join(TINY_SENTENCES) + "\n"},
        params={"tokenizer": params, "transcripts": {"normalization": normalization}},
    )
    info = catalog.load("tokenizer_info")
    assert CTCTokenizer(catalog.load("tokenizer_model")).vocab_size == info["vocab_size"] == 41
    assert info["options"]["sentencepiece_command"] == "/usr/bin/spm_train"
    assert info["normalization"] == {"unicode_form": "NFKC", "lowercase": False, "strip_punctuation": True}
