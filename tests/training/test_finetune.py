"""Fine-tuning (training.finetune): a LoRA run trains and saves only adapters on top of its base run, resumes
exactly, loads and exports merged, and --merge-lora writes a plain run dir with the same outputs; full
fine-tuning holds the front-end and the first encoder blocks still for the first epochs, on one rank and
under DDP; the "finetune" event and DVCLive say what trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from asr_pipeline.models.loading import load_run_model
from asr_pipeline.publish.export import export_run
from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.finetune import merge_run
from asr_pipeline.training.launch import launch_training
from asr_pipeline.training.worker import FAIL_RANK_ENV
from tests.factories import NUM_BINS

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


@pytest.fixture(scope="module")
def base_run(corpus, tokenizer_path, tmp_path_factory) -> Path:
    """The run every fine-tuning here starts from: the tiny model, 2 epochs."""
    import os

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", FAIL_RANK_ENV):
        os.environ.pop(name, None)
    threads = torch.get_num_threads()
    run_dir = tmp_path_factory.mktemp("base")
    run(tiny_config(corpus, tokenizer_path, run_dir, dvclive=False))
    torch.set_num_threads(threads)
    return run_dir


def finetune_config(corpus, tokenizer_path, base_run, run_dir, epochs=2, **finetune) -> dict:
    config = tiny_config(corpus, tokenizer_path, run_dir, init_from=str(base_run), seed=11)
    config["optim"] |= {"epochs": epochs, "learning_rate": 5e-3}
    config["finetune"] = finetune
    return config


def features():
    generator = torch.Generator().manual_seed(5)
    return torch.randn(2, 60, NUM_BINS, generator=generator), torch.tensor([60, 41])


def outputs(run_dir, checkpoint="latest") -> torch.Tensor:
    with torch.no_grad():
        return load_run_model(run_dir, checkpoint).model(*features())[0]


def test_a_lora_run_saves_only_adapters_and_loads_as_its_base_plus_them(
    corpus, tokenizer_path, base_run, tmp_path
):
    run_dir = tmp_path / "lora"
    run(
        finetune_config(
            corpus, tokenizer_path, base_run, run_dir, method="lora", lora_rank=4, merge_lora=True
        )
    )

    saved = load_file(run_dir / "checkpoint_latest" / "model.safetensors")
    assert saved and all(".lora_A." in key or ".lora_B." in key for key in saved)
    base = load_file(base_run / "checkpoint_latest" / "model.safetensors")
    assert sum(t.numel() for t in saved.values()) < sum(t.numel() for t in base.values()) / 5
    assert any(
        key.endswith("lora_B.default.weight") and tensor.abs().sum() > 0 for key, tensor in saved.items()
    )

    [event] = events(run_dir, "finetune")
    values = event["values"]
    assert values["method"] == "lora" and values["base_model"] == str(base_run)
    assert values["trainable_params"] == sum(t.numel() for t in saved.values())
    base_params = sum(p.numel() for p in load_run_model(base_run).model.parameters())
    assert values["total_params"] == values["trainable_params"] + base_params
    assert values["lora"]["rank"] == 4 and values["lora"]["adapted_modules"] > 0

    adapted = outputs(run_dir)
    assert not torch.allclose(adapted, outputs(base_run)), "the adapters changed the model"
    # --merge-lora: a plain run dir (full weights, the plain model's keys) giving the same outputs.
    merged = run_dir / "merged"
    assert [e["values"]["path"] for e in events(run_dir, "merge_lora")] == [str(merged)]
    assert set(load_file(merged / "checkpoint_latest" / "model.safetensors")) == set(base)
    assert json.loads((merged / "training_config.json").read_text())["finetune"]["method"] == "full"
    torch.testing.assert_close(outputs(merged), outputs(run_dir, "best"), rtol=1e-4, atol=1e-5)
    # An export of the LoRA run holds the merged weights and loads without the base run.
    export_run(run_dir, tmp_path / "export")
    torch.testing.assert_close(outputs(tmp_path / "export"), adapted)


def test_a_resumed_lora_run_ends_with_the_uninterrupted_runs_adapters(
    corpus, tokenizer_path, base_run, tmp_path
):
    def config(run_dir, epochs, rank=2):
        values = finetune_config(
            corpus, tokenizer_path, base_run, run_dir, epochs, method="lora", lora_rank=rank
        )
        values["optim"]["lr_decay_steps"] = 50  # the same rates whatever the epoch count
        return values

    whole, first = tmp_path / "whole", tmp_path / "first"
    run(config(whole, 2))
    run(config(first, 1))
    resumed = config(first, 2)
    resumed["run"]["resume_from"] = str(first)
    run(resumed)

    expected = load_file(whole / "checkpoint_latest" / "model.safetensors")
    actual = load_file(first / "checkpoint_latest" / "model.safetensors")
    assert expected.keys() == actual.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], rtol=0, atol=0, msg=key)

    changed = config(first, 3, rank=4)
    changed["run"]["resume_from"] = str(first)
    with pytest.raises(ValueError, match=r"finetune.lora_rank: 2 -> 4"):
        run(changed)


def test_full_finetuning_freezes_the_frontend_and_first_blocks_for_the_first_epochs(
    corpus, tokenizer_path, base_run, tmp_path
):
    frozen_names = ("subsampling.", "blocks.0.")
    config = finetune_config(
        corpus, tokenizer_path, base_run, tmp_path / "one", epochs=1, freeze_frontend=True, freeze_layers=1
    )
    config["finetune"]["freeze_epochs"] = 1
    run(config)
    base = load_file(base_run / "checkpoint_latest" / "model.safetensors")
    after_one = load_file(tmp_path / "one" / "checkpoint_latest" / "model.safetensors")
    for key, tensor in base.items():
        same = torch.equal(after_one[key], tensor)
        if key.startswith(frozen_names):
            assert same, f"{key} trained while frozen"
        elif key.endswith("weight") and tensor.dim() > 1:
            assert not same, f"{key} did not train"
    [event] = events(tmp_path / "one", "finetune")
    base_model = load_run_model(base_run).model
    frozen_params = sum(p.numel() for k, p in base_model.named_parameters() if k.startswith(frozen_names))
    assert event["values"]["trainable_params"] == event["values"]["total_params"] - frozen_params
    assert event["values"]["frozen_modules"] == ["encoder block 0", "subsampling"]

    config["run"]["output_dir"] = str(tmp_path / "two")
    config["optim"]["epochs"] = 2
    run(config)
    freezes = [(e["epoch"], e["values"]["frozen"]) for e in events(tmp_path / "two", "freeze")]
    assert freezes == [(0, True), (1, False)]
    after_two = load_file(tmp_path / "two" / "checkpoint_latest" / "model.safetensors")
    assert not torch.equal(
        after_two["blocks.0.attention.module.qkv_proj.weight"],
        base["blocks.0.attention.module.qkv_proj.weight"],
    )


def test_finetuning_is_logged_to_dvclive_with_the_early_stopping_decision(
    corpus, tokenizer_path, base_run, tmp_path
):
    config = finetune_config(corpus, tokenizer_path, base_run, tmp_path, epochs=4, method="lora")
    config["run"]["dvclive"] = True
    config["optim"] |= {"early_stopping_patience": 1, "early_stopping_min_delta": 1000.0}
    run(config)

    params = yaml.safe_load((tmp_path / "dvclive" / "params.yaml").read_text())
    assert params["finetune"]["method"] == "lora" and params["finetune"]["base_model"] == str(base_run)
    assert params["finetune"]["lora"]["rank"] == 8
    assert params["early_stop"]["stopped_after_epoch"] == 1 and params["early_stop"]["best_epoch"] == 0
    summary = json.loads((tmp_path / "dvclive" / "metrics.json").read_text())
    assert summary["finetune"]["trainable_params"] == params["finetune"]["trainable_params"]


def test_what_cannot_be_finetuned_is_refused_with_the_reason(corpus, tokenizer_path, base_run, tmp_path):
    scratch = tiny_config(corpus, tokenizer_path, tmp_path / "x")
    with pytest.raises(ValueError, match=r"finetune.method lora adapts trained weights: set run.init_from"):
        resolve_config({**scratch, "finetune": {"method": "lora"}})
    with pytest.raises(ValueError, match=r"merge_lora .* needs finetune.method lora"):
        resolve_config({**scratch, "finetune": {"merge_lora": True}})
    with pytest.raises(ValueError, match="lora already freezes every base weight"):
        resolve_config(
            {
                **scratch,
                "run": {**scratch["run"], "init_from": "x"},
                "finetune": {"method": "lora", "freeze_layers": 2},
            }
        )
    with pytest.raises(ValueError, match="freeze_layers=9 but this squeezeformer model has"):
        run(finetune_config(corpus, tokenizer_path, base_run, tmp_path / "deep", freeze_layers=9))

    lora_dir = tmp_path / "lora"
    run(finetune_config(corpus, tokenizer_path, base_run, lora_dir, epochs=1, method="lora"))
    with pytest.raises(ValueError, match=r"holds LoRA adapters only .* merged run dir"):
        run(finetune_config(corpus, tokenizer_path, lora_dir, tmp_path / "again", epochs=1))
    with pytest.raises(ValueError, match="is not a LoRA run"):
        merge_run(base_run, tmp_path / "merged")


@pytest.mark.slow
def test_freezing_then_unfreezing_under_ddp_keeps_the_ranks_in_step(
    corpus, tokenizer_path, base_run, tmp_path
):
    config = finetune_config(corpus, tokenizer_path, base_run, tmp_path, freeze_layers=1, freeze_epochs=1)
    config["run"]["threads_per_rank"] = 1
    path = tmp_path / "config.json"
    save_json(resolve_config(config), path)
    launch_training(path, nproc_per_node=2, env={FAIL_RANK_ENV: ""})

    [summary] = events(tmp_path, "summary")
    digests = summary["values"]["parameter_digests"]
    assert len(digests) == 2 and digests[0] == digests[1], "the ranks' weights differ"
    assert [(e["epoch"], e["values"]["frozen"]) for e in events(tmp_path, "freeze")] == [
        (0, True),
        (1, False),
    ]


def hugging_face_w2v_bert(tmp_path, vocab_size: int | None, with_head: bool = True) -> Path:
    """A random-weight Hugging Face W2V-BERT folder, as one downloaded would be (nothing can be)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Wav2Vec2BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_depthwise_kernel_size=5,
        feature_projection_input_dim=NUM_BINS,
        vocab_size=vocab_size or 32,
    )
    torch.manual_seed(0)
    model_class = transformers.Wav2Vec2BertForCTC if with_head else transformers.Wav2Vec2BertModel
    folder = tmp_path / "hf"
    model_class(config).save_pretrained(folder)
    return folder


def test_lora_adapts_a_hugging_face_w2v_bert_folder_and_loads_from_it(corpus, tokenizer_path, tmp_path):
    from asr_pipeline.text.tokenizer import CTCTokenizer

    vocab = CTCTokenizer.from_file(tokenizer_path).vocab_size
    folder = hugging_face_w2v_bert(tmp_path, vocab)
    config = tiny_config(corpus, tokenizer_path, tmp_path / "run", seed=2)
    config["model"] = {
        "architecture": "w2v-bert",
        "pretrained_dir": str(folder),
        "load_pretrained_weights": True,
    }
    config["optim"] |= {"epochs": 1, "learning_rate": 5e-3}
    config["finetune"] = {"method": "lora", "lora_rank": 2}
    run(config)

    saved = load_file(tmp_path / "run" / "checkpoint_latest" / "model.safetensors")
    assert saved and all("lora_" in key for key in saved)
    [event] = events(tmp_path / "run", "finetune")
    assert event["values"]["base_model"] == str(folder) and event["values"]["lora"]["adapted_modules"] == 16
    with torch.no_grad():
        adapted = load_run_model(tmp_path / "run").model(*features())[0]
    assert torch.isfinite(adapted).all()

    headless = hugging_face_w2v_bert(tmp_path / "headless", vocab, with_head=False)
    config["model"]["pretrained_dir"] = str(headless)
    config["run"]["output_dir"] = str(tmp_path / "run2")
    with pytest.raises(
        ValueError, match=r"lora trains adapters only, but .*headless/hf does not fit.*lm_head"
    ):
        run(config)
