"""training.trainer_step: the Trainer's step functions driven directly on the tiny model: loss normalisation,
gradient accumulation, clipping and the EMA update, without a whole run."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch

from asr_pipeline.data.collate import collate_batch
from asr_pipeline.training.trainer import Trainer
from tests.factories import NUM_BINS
from tests.host_reads import HostReads


def utterances(count: int, frames: int = 80, tokens: int = 6, seed: int = 0) -> list[dict]:
    """Equal lengths: no padding, so a batch and its halves see exactly the same frames."""
    generator = torch.Generator().manual_seed(seed)
    return [
        {
            "id": f"u{i}",
            "text": "",
            "features": torch.randn(frames, NUM_BINS, generator=generator),
            "tokens": torch.randint(1, 10, (tokens,), generator=generator),  # 10 ids, 0 the blank
            "duration_ms": frames * 10,
        }
        for i in range(count)
    ]


def gradients(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}


def test_k_accumulated_micro_batches_give_the_gradient_of_one_k_times_larger_batch(make_trainer):
    trainer, items, k = make_trainer(), utterances(6), 3
    # Eval mode: the conv module's BatchNorm normalises by batch statistics in training mode, so there a
    # micro-batch can never equal its share of a larger batch (measured: up to 150% relative gradient
    # difference on the tiny model). With running statistics the arithmetic under test is all that differs.
    trainer.model.eval()
    trainer.backward(collate_batch(items), window_size=1, last_micro=True)
    whole = gradients(trainer)
    trainer.optimization.optimizer.zero_grad(set_to_none=True)

    for i in range(k):
        trainer.backward(collate_batch(items[2 * i : 2 * i + 2]), window_size=k, last_micro=i == k - 1)
    accumulated = gradients(trainer)

    assert whole.keys() == accumulated.keys() and len(whole) > 10
    # float32 sums in another order (one batch of 6 vs three of 2, then += across micro-batches): a few
    # ulps per element, ~1e-7 relative; 1e-5 relative leaves room for conv/matmul kernels that block
    # differently by batch size, while a wrong normalisation (a factor of k = 3) fails by far.
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-5, atol=1e-7, msg=name)


def test_accumulation_weighs_micro_batches_equally_whatever_their_token_counts(make_trainer):
    # Spec of the documented caveat: per-micro-batch normalisation, so the 2-token micro-batch's tokens
    # weigh 4x those of the 8-token one -- not the gradient of the merged batch.
    trainer = make_trainer()
    trainer.model.eval()  # as above: only the normalisation differs
    short, long = utterances(2, tokens=2, seed=1), utterances(2, tokens=8, seed=2)
    trainer.backward(collate_batch(short), window_size=2, last_micro=False)
    trainer.backward(collate_batch(long), window_size=2, last_micro=True)
    accumulated = gradients(trainer)
    trainer.optimization.optimizer.zero_grad(set_to_none=True)
    trainer.backward(collate_batch(short + long), window_size=1, last_micro=True)
    merged = gradients(trainer)

    assert any(not torch.allclose(accumulated[n], merged[n], rtol=1e-3) for n in merged)


def test_gradient_clip_value_bounds_every_element_and_the_logged_norm_is_unclipped(make_trainer):
    trainer = make_trainer(gradient_clip_norm=None, gradient_clip_value=1e-4)
    trainer.backward(collate_batch(utterances(4)), window_size=1, last_micro=True)
    unclipped = gradients(trainer)
    seen: dict[str, torch.Tensor] = {}
    trainer.optimization.optimizer.step = lambda *a, **k: seen.update(
        gradients(trainer)
    )  # the grads the step would use

    trainer.optimizer_step()

    largest = max(float(g.abs().max()) for g in seen.values())
    assert largest == pytest.approx(1e-4), "clipped to the value, and some element reached it"
    expected_norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in unclipped.values()]))
    assert float(trainer.optimization.grad_norm) == pytest.approx(float(expected_norm), rel=1e-5)
    assert max(float(g.abs().max()) for g in unclipped.values()) > 1e-3


def test_the_ema_copies_the_weights_before_its_start_step_and_averages_after(make_trainer):
    trainer = make_trainer(ema_decay=0.5, ema_start_step=1)
    assert trainer.optimization.ema is not None
    name, param = next(iter(trainer.model.named_parameters()))

    with torch.no_grad():
        param.fill_(2.0)
    trainer.optimization.ema.update(trainer.model, step=0)  # before the start: copy
    assert torch.equal(trainer.optimization.ema.shadow[name], param)
    with torch.no_grad():
        param.fill_(4.0)
    trainer.optimization.ema.update(trainer.model, step=1)  # 0.5 * 2 + 0.5 * 4

    assert torch.equal(trainer.optimization.ema.shadow[name], torch.full_like(param, 3.0))


# Reads of host memory, no wait for a device, once a micro-batch: the loader's batch is checked, and its
# lengths kept (CR-CTC's masks), before its copy to the device; the Zipformer's minimum length is checked
# there too, and again by the model where the lengths are on the CPU (only there: in these CPU runs).
HOST_SIDE = {
    ("__bool__", "ctc.py:check_targets"): 1,
    ("tolist", "trainer_step.py:backward"): 1,
}
ZIPFORMER_HOST_SIDE = {("tolist", "ctc.py:check_input_lengths"): 1, ("__int__", "zipformer.py:forward"): 1}


@pytest.mark.parametrize(
    ("architecture", "precision", "cr_ctc"),
    [
        ("squeezeformer", "f32", False),
        ("squeezeformer", "bf16", False),
        ("squeezeformer", "f16", False),
        ("squeezeformer", "bf16", True),
        ("zipformer", "bf16", False),
        ("w2v-bert", "bf16", False),
    ],  # not Paraformer: its CIF reads how many tokens fired, its decoder's length
)
def test_training_steps_read_nothing_back_from_the_device_between_logs(
    make_trainer, architecture, precision, cr_ctc
):
    """The CPU must be free to queue the next step while the GPU runs this one: a value read back (the
    loss, a count, the gradient norm's verdict) makes it wait for the whole step. The counts wait on the
    device for the log (training.health), and the fused AdamW skips a non-finite step there. The step
    before session 28 waited three times a step: its counts after the backward, the norm's verdict before
    the update, and torch.tensor(len(batch), device=...)."""
    regularization = {"cr_ctc": True, "cr_loss_warmup_steps": 0} if cr_ctc else None
    trainer = make_trainer(precision, architecture=architecture, regularization=regularization)
    assert trainer.optimization.skips_on_device and (trainer.cr_ctc is not None) == cr_ctc
    batches = [collate_batch(utterances(4, seed=seed)) for seed in range(3)]

    with HostReads() as mode:
        for batch in batches:
            trainer.backward(batch, window_size=1, last_micro=True)
            trainer.optimizer_step()

    reads = Counter(mode.reads)
    # CR-CTC draws its masks' spans from the host RNG (SpecAugment.sample_spans): CPU scalars, read there
    assert (reads.pop(("__int__", "augment.py:_spans"), 0) > 0) == cr_ctc
    host_side = HOST_SIDE | (ZIPFORMER_HOST_SIDE if architecture == "zipformer" else {})
    assert reads == {read: count * len(batches) for read, count in host_side.items()}, "the host's, no other"
    with HostReads() as mode:
        trainer._log_train(epoch=0)
    assert mode.reads, "the log reads the counts, once a log window"


@pytest.mark.parametrize("device_skip", [False, True])
def test_under_scaled_adam_a_step_reads_back_at_most_the_norms_verdict_and_once_a_period_the_sizes(
    make_trainer, device_skip
):
    """ScaledAdam (the Zipformer recipe's) is not one of torch's fused optimizers. On the CPU the step reads
    the gradient norm's verdict before it; on CUDA (forced here: ``device_skip``) it is told the verdict as a
    tensor and reads nothing. Its own clipping stays on the device; each tensor's RMS and scale step come
    back once a size period (4 steps), for each of its two param groups, and the RMS once at the start."""
    trainer = make_trainer(architecture="zipformer", optimizer="scaled_adam")
    assert not trainer.optimization.skips_on_device, "on the CPU: the host's read waits for nothing"
    trainer.optimization.optimizer.device_skip = device_skip
    assert trainer.optimization.skips_on_device == device_skip
    batches = [collate_batch(utterances(4, seed=seed)) for seed in range(4)]

    with HostReads() as mode:
        for batch in batches:
            trainer.backward(batch, window_size=1, last_micro=True)
            trainer.optimizer_step()

    verdict = {} if device_skip else {("__bool__", "optimization.py:step"): 1}
    per_step = HOST_SIDE | ZIPFORMER_HOST_SIDE | verdict
    expected = {read: count * len(batches) for read, count in per_step.items()}
    groups = len(trainer.optimization.optimizer.param_groups)
    expected |= {
        ("tolist", "scaled_adam.py:_init_states"): groups,
        ("tolist", "scaled_adam.py:_sizes"): groups,
    }
    assert Counter(mode.reads) == expected


def ctc_waits(batch, vocab_size: int, device: torch.device) -> int:
    """The waits torch's own CTC loss makes, forward and backward, on a batch of ``batch``'s shape."""
    frames = 40  # output frames per utterance: any length the targets fit in
    log_probs = torch.randn(frames, len(batch), vocab_size, device=device).log_softmax(-1).requires_grad_()
    lengths = torch.full((len(batch),), frames, device=device)
    targets, target_lengths = batch.targets.to(device), batch.target_lengths.to(device)
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            losses = torch.nn.functional.ctc_loss(
                log_probs, targets, lengths, target_lengths, reduction="none", zero_infinity=True
            )
            losses.sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchronizing" in str(w.message) for w in seen)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(
    ("architecture", "optimizer"),
    [("zipformer", "adamw"), ("squeezeformer", "adamw"), ("zipformer", "scaled_adam")],
)
def test_on_cuda_a_step_waits_for_the_device_only_inside_the_ctc_loss(make_trainer, architecture, optimizer):
    """torch's sync debug mode counts every wait of the steps (backward, update): no more than torch's CTC
    makes on its own (its kernel reads the lengths on the host), and ScaledAdam's read of its sizes at the
    end of a size period (the 4th update, here: one a param group)."""
    trainer = make_trainer("bf16", architecture=architecture, device="cuda", optimizer=optimizer)
    assert trainer.optimization.skips_on_device
    device = trainer.ctx.device
    batches = [collate_batch(utterances(4, seed=seed)) for seed in range(3)]
    trainer.backward(batches[0], window_size=1, last_micro=True)  # warm-up: cuBLAS, allocator, autotuning
    trainer.optimizer_step()
    torch.cuda.synchronize(device)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for batch in batches:
                trainer.backward(batch, window_size=1, last_micro=True)
                trainer.optimizer_step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    waits = sum("synchronizing" in str(w.message) for w in seen)

    sizes = len(trainer.optimization.optimizer.param_groups) if optimizer == "scaled_adam" else 0
    assert waits <= len(batches) * ctc_waits(batches[0], trainer.vocab_size, device) + sizes


def test_an_utterance_shorter_than_the_model_takes_is_refused_by_name_on_the_host(make_trainer):
    """The Zipformer's front end needs 9 frames: the step names the short utterance before the batch goes to
    the device, on every device and under compile (the model's own check reads CPU lengths only)."""
    trainer = make_trainer(architecture="zipformer")
    short = utterances(1, frames=8, tokens=2, seed=1)
    short[0]["id"] = "too-short"
    batch = collate_batch(utterances(2) + short)

    with pytest.raises(ValueError, match=r"needs at least 9 input frames.*too-short \(8 frames\)\. Drop"):
        trainer.backward(batch, window_size=1, last_micro=True)
    assert all(p.grad is None for p in trainer.model.parameters()), "refused before the forward"
