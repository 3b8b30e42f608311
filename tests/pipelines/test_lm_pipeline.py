import kenlm

from asr_pipeline.pipelines.lm import create_pipeline
from tests.conftest import TINY_SENTENCES
from tests.pipelines.conftest import run_stage


def test_lm_stage_builds_a_loadable_arpa_and_binary(tmp_path, project_params):
    catalog = run_stage(
        create_pipeline(),
        {"tokenizer_corpus": "\n".join(TINY_SENTENCES) + "\n"},
        params={"lm": project_params["lm"]},
    )
    arpa = catalog.load("lm_arpa")
    assert arpa.lstrip().startswith("\\data\\") and "ngram 3=" in arpa
    binary = tmp_path / "lm.binary"
    binary.write_bytes(catalog.load("lm_binary"))
    model = kenlm.Model(str(binary))
    assert model.order == 3
    assert model.score("the lazy dog sat on the mat") > model.score("mat the on sat dog lazy the")
