"""training.validation: the metrics that choose the best checkpoint, greedy decoding of CTC frames and of
per-token outputs; and whole in-process runs of validation: every N steps, the best checkpoint across step and epoch
validations, beam search with a KenLM model, n-best sample predictions, and validation leaving the
trained weights untouched."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.models.loading import load_run_model
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training import trainer_state
from asr_pipeline.training.config import ValidationConfig, resolve_config
from asr_pipeline.training.distributed import DistributedContext
from asr_pipeline.training.loaders import build_data
from asr_pipeline.training.validation import ValidationDecoder, validate, validation_metrics
from tests.factories import random_sentences

from .conftest import events, tiny_config
from .conftest import run_in_process as run

pytestmark = pytest.mark.usefixtures("single_process")


def test_validate_every_steps_adds_step_validations_and_the_epoch_end_still_validates(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["validation"] = {"every_steps": 3}
    run(config)

    validations = events(tmp_path, "validation")
    epoch_ends = {e["epoch"]: e["step"] for e in events(tmp_path, "epoch")}
    step_triggered = [e["step"] for e in validations if e["values"]["trigger"] == "step"]
    epoch_triggered = [(e["epoch"], e["step"]) for e in validations if e["values"]["trigger"] == "epoch"]
    last_step = max(epoch_ends.values())
    assert last_step >= 6, "the tiny corpus gives ~4 steps per epoch, 2 epochs"
    assert step_triggered == list(range(3, last_step + 1, 3))
    # An epoch end validates unless a step validation just scored the same weights.
    assert epoch_triggered == [(epoch, step) for epoch, step in epoch_ends.items() if step % 3 != 0]
    assert all(e["values"]["utterances"] == 5 and e["values"]["decoding"] == "greedy" for e in validations)


def test_the_best_checkpoint_holds_the_weights_of_the_lowest_cer_across_step_and_epoch_validations(
    corpus, tokenizer_path, tmp_path, monkeypatch
):
    # The tiny model sits on the blank plateau (CER 100 throughout), so the CERs are scripted: the real
    # validation runs and only its CER is replaced. The lowest (20) comes from a step validation.
    cers = iter([60.0, 50.0, 55.0, 20.0, 45.0, 30.0, 25.0, 70.0, 40.0, 35.0, 33.0, 31.0])
    weights_at_validation: list[dict[str, torch.Tensor]] = []
    real_validate = trainer_state.validate

    def scripted(model, *args, **kwargs):
        scores = real_validate(model, *args, **kwargs)
        scores["val_cer"] = next(cers)
        weights_at_validation.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return scores

    monkeypatch.setattr(trainer_state, "validate", scripted)
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 3
    config["validation"] = {"every_steps": 2}
    run(config)

    validations = events(tmp_path, "validation")
    assert [e["values"]["val_cer"] for e in validations][:4] == [60.0, 50.0, 55.0, 20.0]
    best_so_far, expected_flags = math.inf, []
    for validation in validations:
        expected_flags.append(validation["values"]["val_cer"] < best_so_far)
        best_so_far = min(best_so_far, validation["values"]["val_cer"])
    assert [e["values"]["best"] for e in validations] == expected_flags
    best = validations[3]
    assert best["values"]["trigger"] == "step"
    pointer = json.loads((tmp_path / "checkpoint_best.json").read_text())
    assert (pointer["metrics"]["val_cer"], pointer["step"]) == (20.0, best["step"])
    saved = load_file(tmp_path / "checkpoint_best" / "model.safetensors")
    assert all(torch.equal(saved[name], weights_at_validation[3][name]) for name in saved)
    latest = json.loads((tmp_path / "checkpoint_latest.json").read_text())
    assert latest["metrics"]["val_cer"] == validations[-1]["values"]["val_cer"]


def test_validation_does_not_change_the_weights_training_ends_with(corpus, tokenizer_path, tmp_path):
    plain = tiny_config(corpus, tokenizer_path, tmp_path / "plain")
    often = tiny_config(corpus, tokenizer_path, tmp_path / "often")
    often["validation"] = {"every_steps": 1}

    run(plain)
    run(often)

    digests = [
        events(tmp_path / name, "summary")[0]["values"]["parameter_digests"] for name in ("plain", "often")
    ]
    assert digests[0] == digests[1]
    assert len(events(tmp_path / "often", "validation")) > len(events(tmp_path / "plain", "validation"))


def test_log_samples_writes_the_first_utterances_with_reference_and_hypothesis(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    config["validation"] = {"log_samples": 3}
    run(config)

    [validation] = events(tmp_path, "validation")
    samples = validation["values"]["samples"]
    assert [s["id"] for s in samples] == ["va-000", "va-001", "va-002"]
    assert [s["reference"] for s in samples] == random_sentences(5, seed=3)[:3]  # the val shard's texts
    assert all(isinstance(s["hypothesis"], str) and "n_best" not in s for s in samples)


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory):
    arpa, _ = build_kenlm("\n".join(random_sentences(300, seed=11)), KenLMOptions(order=2))
    path = tmp_path_factory.mktemp("lm") / "val.arpa"
    path.write_text(arpa)
    return path


def test_beam_search_validation_with_an_lm_logs_n_best_lists(corpus, tokenizer_path, tmp_path, lm_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"]["epochs"] = 1
    config["validation"] = {
        "decoding": {
            "decoder": "prefix_beam",
            "beam_width": 4,
            "n_best": 3,
            "lm_weight": 0.45,
            "word_score": 1.0,
            "lm_no_eos": True,
        },
        "lm_path": str(lm_path),
        "log_samples": 2,
    }
    run(config)

    [validation] = events(tmp_path, "validation")
    values = validation["values"]
    assert values["decoding"] == "beam" and values["utterances"] == 5
    for sample in values["samples"]:
        n_best = sample["n_best"]
        assert 1 <= len(n_best) <= 3
        assert n_best[0]["text"] == sample["hypothesis"]
        assert [h["score"] for h in n_best] == sorted((h["score"] for h in n_best), reverse=True)


def test_a_missing_validation_lm_is_refused_before_training(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["validation"] = {"decoding": {"decoder": "prefix_beam"}, "lm_path": str(tmp_path / "nope.arpa")}

    with pytest.raises(FileNotFoundError, match=r"nope\.arpa"):
        run(config)
    assert not events(tmp_path, "train"), "nothing trained"


def test_beam_search_validation_without_a_tokenizer_is_refused(corpus, tokenizer_path, tmp_path):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["run"]["tokenizer"] = None
    config["model"]["vocab_size"] = 12
    config["validation"] = {"decoding": {"decoder": "lexicon_free", "beam_width": 4}}

    with pytest.raises(ValueError, match=r"needs run\.tokenizer"):
        run(config)


@pytest.mark.parametrize(
    ("architecture", "metrics"),
    [
        ("squeezeformer", ("val_cer", "val_wer")),
        ("paraformer", ("val_cer", "val_wer")),
        ("hubert-pretrain", ("val_loss", "val_accuracy")),
    ],
)
def test_the_best_checkpoint_is_chosen_by_the_first_of_the_objectives_two_metrics(architecture, metrics):
    assert validation_metrics(architecture) == metrics


def test_greedy_validation_collapses_ctc_frames_and_without_a_tokenizer_shows_token_ids():
    decoder = ValidationDecoder(ValidationConfig(), tokenizer=None, blank_id=0)
    log_probs = torch.full((1, 6, 4), -10.0)
    log_probs[0, torch.arange(6), torch.tensor([2, 2, 0, 3, 3, 1])] = 0.0  # (B, T', V): 2 2 _ 3 3 1
    assert decoder.method == "greedy"
    assert decoder.decode(log_probs, torch.tensor([6])) == [("2 3 1", ())]
    assert decoder.decode(log_probs, torch.tensor([2])) == [("2", ())]  # frames past the length are not read


def test_a_per_token_output_is_never_collapsed_and_beam_search_over_it_is_refused():
    per_token = ValidationDecoder(ValidationConfig(), tokenizer=None, blank_id=0, output="paraformer")
    log_probs = torch.full((1, 3, 4), -10.0)
    log_probs[0, torch.arange(3), torch.tensor([2, 2, 3])] = 0.0  # one posterior per token: 2 2 3
    assert per_token.decode(log_probs, torch.tensor([3])) == [("2 2 3", ())]
    beam = ValidationConfig(decoding=DecodingOptions(decoder="lexicon_free"))
    with pytest.raises(ValueError, match="validate it greedily"):
        ValidationDecoder(beam, tokenizer=None, blank_id=0, output="paraformer")


def test_score_averages_logs_each_average_beside_the_raw_scores_as_decoding_its_saved_file_scores_it(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["optim"] |= {"use_averaged_model": True, "average_period": 2, "ema_decay": 0.9}
    config["validation"] = {"score_averages": True}

    metrics = run(config)

    last = events(tmp_path, "validation")[-1]["values"]
    assert {"val_cer_averaged", "val_wer_averaged", "val_loss_averaged", "duration_sec_ema"} <= set(last)
    assert last["val_loss_averaged"] != last["val_loss"] != last["val_loss_ema"], "three sets of weights"
    assert (metrics["val_cer_averaged"], metrics["val_cer_ema"]) == (
        last["val_cer_averaged"],
        last["val_cer_ema"],
    )
    resolved = resolve_config(config)
    ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    loader = build_data(resolved, ctx).val_loader
    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    for weights in ("averaged", "ema"):  # the epoch's last validation scored what its checkpoint saved
        saved = load_run_model(tmp_path, weights=weights).model
        scores = validate(saved, loader, resolved, ctx, tokenizer)
        assert {key: scores[key] for key in ("val_loss", "val_cer", "val_wer")} == {
            key: last[f"{key}_{weights}"] for key in ("val_loss", "val_cer", "val_wer")
        }, weights


def test_scoring_the_averages_does_not_change_the_weights_training_ends_with(
    corpus, tokenizer_path, tmp_path
):
    digests = []
    for name, score_averages in (("plain", False), ("scored", True)):
        config = tiny_config(corpus, tokenizer_path, tmp_path / name)
        config["optim"] |= {"use_averaged_model": True, "average_period": 2}
        config["validation"] = {"score_averages": score_averages}
        run(config)
        digests.append(events(tmp_path / name, "summary")[0]["values"]["parameter_digests"])

    assert digests[0] == digests[1]


def test_score_averages_without_an_average_kept_is_refused_naming_the_settings(
    corpus, tokenizer_path, tmp_path
):
    config = tiny_config(corpus, tokenizer_path, tmp_path)
    config["validation"] = {"score_averages": True}

    with pytest.raises(
        ValueError, match=r"validation.score_averages .* keeps none: set optim.use_averaged_model"
    ):
        resolve_config(config)
