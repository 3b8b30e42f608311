import kenlm

from asr_pipeline.pipelines.lm import create_pipeline
from tests.conftest import TINY_SENTENCES
from tests.pipelines.conftest import run_stage


def test_lm_stage_builds_a_loadable_arpa_and_binary(tmp_path, project_params, spm_model):
    catalog = run_stage(
        create_pipeline(),
        {"tokenizer_corpus": "\n".join(TINY_SENTENCES) + "\n", "tokenizer_model": spm_model},
        params={"lm": project_params["lm"]},
    )
    arpa = catalog.load("lm_arpa")
    assert arpa.lstrip().startswith("\\data\\") and "ngram 3=" in arpa
    binary = tmp_path / "lm.binary"
    binary.write_bytes(catalog.load("lm_binary"))
    model = kenlm.Model(str(binary))
    assert model.order == 3
    assert model.score("the lazy dog sat on the mat") > model.score("mat the on sat dog lazy the")


def test_lm_stage_builds_a_piece_lm_over_the_tokenizers_pieces(tmp_path, project_params, spm_model):
    catalog = run_stage(
        create_pipeline(),
        {"tokenizer_corpus": "\n".join(TINY_SENTENCES) + "\n", "tokenizer_model": spm_model},
        params={"lm": project_params["lm"]},
    )
    binary = tmp_path / "tokens_lm.binary"
    binary.write_bytes(catalog.load("token_lm_binary"))
    model = kenlm.Model(str(binary))
    assert model.order == project_params["lm"]["token_order"]
    pieces = " ".join(sentencepiece_pieces(spm_model, TINY_SENTENCES[0]))
    assert model.score(pieces) > model.score(" ".join(reversed(pieces.split())))
    assert "<unk>" not in [w for w in pieces.split()]


def sentencepiece_pieces(model: bytes, text: str) -> list[str]:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model).encode(text, out_type=str)
