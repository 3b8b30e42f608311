"""Zipformer and W2V-BERT train through the same engine as Squeezeformer: a real two-rank torchrun job,
resume (and its refusal of a changed model), EMA with bf16 autocast, init-from after a vocabulary change,
and W2V-BERT's Hugging Face import, each on the tiny corpus of ``conftest``."""

from __future__ import annotations

import json
import math

import pytest
import torch

from asr_pipeline.models.loading import load_run_model
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.launch import check_config, launch_training
from asr_pipeline.training.worker import FAIL_RANK_ENV, parameter_digest

from .conftest import run_in_process, tiny_config

ARCHITECTURES = ["zipformer", "w2v-bert", "paraformer"]
# Layers whose shape follows the vocabulary: the output layer, and Paraformer's token embedding (glancing and
# the refinement pass) and CTC head.
VOCABULARY_LAYERS = {"zipformer": 1, "w2v-bert": 1, "paraformer": None}


def events_of(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def config_for(architecture: str, corpus, tokenizer_path, run_dir, **run) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, **run)
    config["model"] = {"architecture": architecture, "variant": "tiny", "dropout": 0.0}
    config["optim"]["epochs"] = 1
    return config


@pytest.mark.parametrize(
    "architecture",
    [  # ~25 s each here: the Zipformer's job in `make test`, the others in `make test-all`
        arch if arch == "zipformer" else pytest.param(arch, marks=pytest.mark.slow) for arch in ARCHITECTURES
    ],
)
def test_a_two_rank_torchrun_job_trains_and_its_run_dir_rebuilds_the_model(
    architecture, corpus, tokenizer_path, tmp_path
):
    config_path = tmp_path / "training_config.json"
    save_json(resolve_config(config_for(architecture, corpus, tokenizer_path, tmp_path)), config_path)

    launch_training(config_path, nproc_per_node=2, env={FAIL_RANK_ENV: ""})

    events = events_of(tmp_path)
    summary = next(e for e in events if e["type"] == "summary")["values"]
    digests = summary["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1], "both ranks end with the same weights"
    assert {e["type"] for e in events} >= {"train", "validation", "epoch", "checkpoint", "summary"}
    loaded = load_run_model(tmp_path)
    assert loaded.architecture == architecture
    assert loaded.output == ("paraformer" if architecture == "paraformer" else "ctc")
    assert parameter_digest(loaded.model) == digests[0]


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_resume_continues_the_run_and_refuses_a_changed_model(architecture, corpus, tokenizer_path, tmp_path):
    config = config_for(architecture, corpus, tokenizer_path, tmp_path)
    first = run_in_process(config)

    config["optim"]["epochs"] = 2
    config["run"]["resume_from"] = str(tmp_path)
    resumed = run_in_process(config)
    assert resumed["epochs"] == 2 and resumed["steps"] > first["steps"] > 0

    changed = dict(config, model={**config["model"], "variant": "demo"})
    with pytest.raises(ValueError, match=r"cannot resume .*\n  model.variant: 'tiny' -> 'demo'"):
        run_in_process(changed)


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_bf16_autocast_with_an_ema_trains_to_finite_losses(architecture, corpus, tokenizer_path, tmp_path):
    config = config_for(architecture, corpus, tokenizer_path, tmp_path, precision="bf16")
    config["optim"]["ema_decay"] = 0.9

    metrics = run_in_process(config)

    assert metrics["train_loss"] == pytest.approx(metrics["train_loss"])  # finite: NaN != NaN
    assert metrics["train_loss"] < 1e4
    assert (tmp_path / "checkpoint_latest" / "ema.safetensors").is_file()


@pytest.mark.usefixtures("single_process")
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_init_from_after_a_vocabulary_change_skips_only_the_output_layer(
    architecture, corpus, tokenizer_path, tmp_path
):
    source = tmp_path / "source"
    run_in_process(config_for(architecture, corpus, tokenizer_path, source))

    target = tmp_path / "target"
    config = config_for(architecture, corpus, tokenizer_path, target, init_from=str(source))
    config["run"]["tokenizer"] = None
    config["run"]["dry_run"] = True  # the init report is all this test reads
    tokenizer_vocab = load_run_model(source).model_config["vocab_size"]
    config["model"]["vocab_size"] = tokenizer_vocab + 3
    config["validation"] = {}
    config["data"]["val_manifests"] = []
    run_in_process(config)

    [init] = [e["values"] for e in events_of(target) if e["type"] == "init_from"]
    assert init["loaded"] > 0
    assert init["skipped"] and all("->" in why for why in init["skipped"].values())
    layers = {name.rsplit(".", 1)[0] for name in init["skipped"]}
    model = load_run_model(source).model
    vocab_sized = {
        name.rsplit(".", 1)[0] for name, p in model.state_dict().items() if tokenizer_vocab in p.shape
    }
    assert layers == vocab_sized, f"only the vocabulary-sized layers differ, got {sorted(init['skipped'])}"
    if VOCABULARY_LAYERS[architecture] is not None:
        assert len(layers) == VOCABULARY_LAYERS[architecture]


def test_shards_narrower_than_the_architecture_are_refused_before_torchrun(corpus, tokenizer_path, tmp_path):
    config = config_for("w2v-bert", corpus, tokenizer_path, tmp_path)
    del config["data"]["input_dim"]  # w2v-bert's frontend width: 160, while the shards hold 16

    resolved = resolve_config(config)
    assert resolved.data.input_dim == 160
    with pytest.raises(
        ValueError, match=r"train-00000.parquet holds 16-dim features, but the w2v-bert .*160"
    ):
        check_config(resolved)


@pytest.mark.usefixtures("single_process")
def test_a_hugging_face_w2v_bert_folder_gives_the_model_its_config_and_weights(
    corpus, tokenizer_path, tmp_path
):
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.Wav2Vec2BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_depthwise_kernel_size=5,
        feature_projection_input_dim=16,  # the tiny corpus' width
    )
    hf_dir = tmp_path / "hf"
    transformers.Wav2Vec2BertModel(hf_config).save_pretrained(hf_dir)
    config = config_for("w2v-bert", corpus, tokenizer_path, tmp_path / "run", dry_run=True)
    config["model"] = {
        "architecture": "w2v-bert",
        "pretrained_dir": str(hf_dir),
        "load_pretrained_weights": True,
    }

    run_in_process(config)

    [report] = [e["values"] for e in events_of(tmp_path / "run") if e["type"] == "pretrained"]
    assert report["loaded"] > 0 and not report["skipped"]
    assert all(name.startswith("lm_head") for name in report["left_at_init"]), "only the CTC head is new"
    saved = json.loads((tmp_path / "run" / "training_config.json").read_text())
    assert saved["model"]["pretrained_dir"] == str(hf_dir)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_a_cuda_run_trains_and_resumes_in_each_precision(
    architecture, precision, corpus, tokenizer_path, tmp_path, single_process
):
    config = config_for(architecture, corpus, tokenizer_path, tmp_path, backend="cuda", precision=precision)
    config["run"]["dvclive"] = False  # GPU machines may lack dvc; the curves are tested on the CPU
    first = run_in_process(config)

    config["optim"]["epochs"] = 2
    config["run"]["resume_from"] = str(tmp_path)
    resumed = run_in_process(config)

    assert math.isfinite(first["train_loss"]) and math.isfinite(resumed["train_loss"])
    assert resumed["steps"] > first["steps"] > 0


@pytest.mark.usefixtures("single_process")
def test_a_paraformer_run_validates_and_is_evaluated_by_its_own_parallel_pass(
    corpus, tokenizer_path, tmp_path
):
    from asr_pipeline.pipelines.evaluate.nodes import evaluate_split

    config = config_for("paraformer", corpus, tokenizer_path, tmp_path)
    config["model"]["options"] = {"enhanced": True}
    run_in_process(config)

    events = events_of(tmp_path)
    train = [e["values"] for e in events if e["type"] == "train"]
    assert {
        "loss_ce",
        "loss_quantity",
        "loss_ctc",
        "loss_shallow_ctc",
        "loss_boundary",
        "loss_refine",
    } <= set(train[-1]), "each loss term is logged per token"
    [validation] = [e["values"] for e in events if e["type"] == "validation"]
    assert validation["utterances"] == 5 and validation["decoding"] == "greedy"

    hypotheses, metrics = evaluate_split(
        tmp_path,
        corpus["val"],
        tokenizer_path.read_bytes(),
        tmp_path / "no-lexicon.txt",
        tmp_path / "no-lm.binary",
        tmp_path / "no-lm.binary",
        {},
        {"decoders": ["lexicon", "lexicon_free"]},
    )
    assert metrics["utterances"] == 5 and set(metrics["greedy"]) == {"wer", "cer"}
    assert set(metrics["skipped"]) == {"lexicon", "lexicon_free"}
    rows = [json.loads(line) for line in hypotheses.splitlines()]
    assert [set(row) for row in rows] == [{"id", "reference", "greedy"}] * 5


def test_a_model_config_its_architecture_refuses_is_refused_before_torchrun(corpus, tokenizer_path, tmp_path):
    config = config_for("w2v-bert", corpus, tokenizer_path, tmp_path)
    config["model"]["options"] = {"relative_key_attention": "flex"}  # tiny's heads are 8 wide

    with pytest.raises(ValueError, match=r"relative_key_attention='flex' needs heads at least 16 wide"):
        check_config(resolve_config(config))


def test_the_check_before_torchrun_takes_a_blank_past_2_from_a_tokenizer_it_has_not_read(
    corpus, tokenizer_path, tmp_path
):
    # The tokenizer's vocabulary is read in the workers; the model's blank check must not meet a vocabulary of 2.
    config = config_for("paraformer", corpus, tokenizer_path, tmp_path)
    config["model"]["blank_id"] = 5

    check_config(resolve_config(config))
