"""ScaledAdam (training.scaled_adam): the properties the Zipformer paper states, each measured on tiny tensors."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch

from asr_pipeline.training.scaled_adam import ScaledAdam
from tests.host_reads import HostReads


def tensor_with_rms(rms: float, shape=(8, 16), seed: int = 0) -> torch.nn.Parameter:
    values = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return torch.nn.Parameter(values * rms / values.pow(2).mean().sqrt())


def rms(t: torch.Tensor) -> float:
    return float(t.detach().pow(2).mean().sqrt())


def take_step(optimizer: ScaledAdam, params, grads) -> None:
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    optimizer.step()


def test_the_update_is_proportional_to_the_parameters_rms():
    small, large = tensor_with_rms(0.1), tensor_with_rms(1.0)
    before = [small.detach().clone(), large.detach().clone()]
    grad = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    optimizer = ScaledAdam([small, large], lr=0.05, clipping_scale=None)
    take_step(optimizer, [small, large], [grad, grad])
    moved_small, moved_large = rms(small - before[0]), rms(large - before[1])
    assert moved_large / moved_small == pytest.approx(10.0, rel=1e-4)


def test_the_first_step_is_bias_corrected_lr_times_rms_per_element():
    # beta1 = 0 leaves one Adam step: with v bias-corrected, g / sqrt(v) = sign(g), so every element moves
    # by lr * rms (uncorrected it would move sqrt(1 / (1 - beta2)) ~ 7x further).
    p = tensor_with_rms(0.5)
    before = p.detach().clone()
    grad = torch.randn(8, 16, generator=torch.Generator().manual_seed(2))
    optimizer = ScaledAdam([p], lr=0.01, betas=(0.0, 0.98), clipping_scale=None)
    take_step(optimizer, [p], [grad])
    expected = before - 0.01 * 0.5 * grad.sign()
    torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7)


def grow_for_one_period(
    scalar_lr_scale: float, *, lr: float = 0.05, start_rms: float = 1.0, max_rms: float = 3.0
):
    p = tensor_with_rms(start_rms)
    optimizer = ScaledAdam(
        [p],
        lr=lr,
        betas=(0.0, 0.98),
        clipping_scale=None,
        scalar_lr_scale=scalar_lr_scale,
        size_update_period=4,
        param_max_rms=max_rms,
    )
    for _ in range(4):  # the loss falls as p grows: d loss / d log(scale) = sum(p * g) < 0
        take_step(optimizer, [p], [-p.detach()])
    return rms(p)


def test_the_learned_scale_grows_a_parameter_whose_loss_wants_it_larger():
    # One size update after 4 steps: s = -lr * scalar_lr_scale * sum(sg) / sqrt(mean(sg^2)) ~ 4 * 0.005, so the
    # parameter ends ~2 % larger than with the scale term off (sg vary a little as p grows: sum/rms < 4).
    without = grow_for_one_period(0.0)
    with_scale = grow_for_one_period(0.1)
    assert with_scale / without == pytest.approx(1.02, rel=2e-3)
    assert with_scale / without > 1.015


def test_the_scale_step_never_takes_the_rms_past_param_max_rms():
    # The scale step alone would add ~4 % of 2.9 (lr 0.001 * scalar_lr_scale 10 * 4 steps), the Adam part
    # lr * rms = 0.0029 a step: uncapped ~3.026; capped, the scale step stops at 3.0 and one Adam step follows.
    uncapped = grow_for_one_period(10.0, lr=0.001, start_rms=2.9, max_rms=100.0)
    capped = grow_for_one_period(10.0, lr=0.001, start_rms=2.9, max_rms=3.0)
    assert uncapped > 3.02
    assert capped <= 3.0 + 0.0035


def test_a_gradient_far_above_the_median_norm_is_clipped_to_clipping_scale_times_it():
    # 11 steps of norm-1 gradients (the estimate at step 10: threshold = 2 * median 1), then a 10x gradient:
    # the clipped optimizer must move exactly as an unclipped one given that gradient scaled to 2 / 10.
    direction = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    clipped_p, reference_p = tensor_with_rms(1.0), tensor_with_rms(1.0)
    clipped = ScaledAdam([clipped_p], lr=0.01, clipping_scale=2.0)
    reference = ScaledAdam([reference_p], lr=0.01, clipping_scale=None)
    unit = direction / direction.norm() / 1.0  # norm measured as |g * rms|, rms ~1 (changes a little)
    for _ in range(11):
        take_step(clipped, [clipped_p], [unit])
        take_step(reference, [reference_p], [unit])
    torch.testing.assert_close(clipped_p.detach(), reference_p.detach())
    assert clipped.num_clipped() == 0
    norms = clipped.state[clipped_p]["model_norms"]
    threshold = clipped.state[clipped_p]["model_norm_threshold"]
    assert threshold == pytest.approx(2.0 * float(norms[~torch.isnan(norms)].median()))
    spike = 10 * unit
    spike_norm = float((spike * clipped.state[clipped_p]["param_rms"]).norm())
    take_step(clipped, [clipped_p], [spike])
    take_step(reference, [reference_p], [spike * threshold / spike_norm])
    assert clipped.num_clipped() == 1
    torch.testing.assert_close(clipped_p.detach(), reference_p.detach())


def test_scalars_step_at_the_scalar_rate_and_stay_within_scalar_max():
    scalar = torch.nn.Parameter(torch.tensor([1.0]))
    optimizer = ScaledAdam([scalar], lr=0.1, betas=(0.0, 0.98), clipping_scale=None, scalar_lr_scale=0.1)
    take_step(optimizer, [scalar], [torch.tensor([3.0])])
    assert float(scalar.detach()) == pytest.approx(
        1.0 - 0.1 * 0.1, abs=1e-6
    )  # Adam's first step: lr * sign(g)
    runaway = torch.nn.Parameter(torch.tensor([50.0]))
    optimizer = ScaledAdam([runaway], lr=0.1, clipping_scale=None, scalar_max=10.0)
    take_step(optimizer, [runaway], [torch.tensor([0.0])])
    assert float(runaway.detach()) == pytest.approx(10.0)


def test_state_dict_round_trips_and_resumes_the_same_updates():
    a, b = tensor_with_rms(1.0, seed=4), tensor_with_rms(1.0, seed=4)
    grads = [torch.randn(8, 16, generator=torch.Generator().manual_seed(10 + i)) for i in range(6)]
    first = ScaledAdam([a], lr=0.02)
    for g in grads[:3]:
        take_step(first, [a], [g])
    b.data.copy_(a.detach())
    second = ScaledAdam([b], lr=0.02)
    second.load_state_dict(copy.deepcopy(first.state_dict()))  # as from a checkpoint file: no shared tensors
    for g in grads[3:]:
        take_step(first, [a], [g])
        take_step(second, [b], [g])
    torch.testing.assert_close(a.detach(), b.detach())


def test_a_loaded_float32_optimizer_keeps_its_clipping_history_in_float64():
    # torch's load_state_dict casts floating state to the parameters' dtype: 1 + 1e-12 would come back 1.0.
    a, b = tensor_with_rms(1.0, seed=4), tensor_with_rms(1.0, seed=4)
    first = ScaledAdam([a], lr=0.02, clipping_update_period=4)
    for step in range(5):  # past the first threshold (step 4)
        take_step(first, [a], [torch.randn(8, 16, generator=torch.Generator().manual_seed(step))])
    saved = first.state_dict()
    saved["state"][0]["model_norms"] += 1e-12
    saved["state"][0]["model_norm_threshold"] += 1e-12
    second = ScaledAdam([b], lr=0.02, clipping_update_period=4)
    second.load_state_dict(saved)
    for key in ("model_norms", "model_norm_threshold"):
        assert second.state[b][key].dtype == torch.float64
        assert torch.equal(second.state[b][key], saved["state"][0][key]), key
        assert second.state[b][key].data_ptr() != saved["state"][0][key].data_ptr(), key  # not shared


def mixed_params(seed: int = 5) -> list[torch.nn.Parameter]:
    """Matrices of three sizes and two scalars, as a model's parameters come."""
    return [
        tensor_with_rms(0.5, (8, 16), seed),
        torch.nn.Parameter(torch.tensor([0.3])),
        tensor_with_rms(1.0, (16,), seed + 1),
        tensor_with_rms(2.0, (4, 4, 3), seed + 2),
        torch.nn.Parameter(torch.tensor(-0.2)),
    ]


def random_grads(params, step: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + step)
    spike = 30.0 if step == 12 else 1.0  # past the threshold estimated at step 10: clipped
    return [torch.randn(p.shape, generator=generator) * spike for p in params]


def old_format(state_dict: dict, period: int) -> dict:
    """``state_dict`` as the per-tensor ScaledAdam (before session 29) saved it, taken when one step of the
    current size period has run: the RMS a tensor, the period's sums one entry a step (the stale ones of
    the last period after it), the clipping history on the CPU, its threshold a float (absent before the
    first estimate), the clipped count an int."""
    old = copy.deepcopy(state_dict)
    for state in old["state"].values():
        assert state["step"] % period == 1
        if "param_rms" in state:
            state["param_rms"] = torch.tensor(state["param_rms"])
            stale = torch.full((period - 1,), 1e6)  # must be ignored
            state["scale_grads"] = torch.cat([state.pop("scale_grad_sum").reshape(1), stale])
            del state["scale_grad_sq_sum"]
        if "model_norms" in state:
            state["model_norms"] = state["model_norms"].cpu()
            state["num_clipped"] = int(state["num_clipped"])
            threshold = float(state.pop("model_norm_threshold"))
            if threshold != float("inf"):
                state["model_norm_threshold"] = threshold
    return old


@pytest.mark.parametrize("steps", [5, 13])  # before and after the first clipping threshold (step 10)
def test_a_checkpoint_of_the_per_tensor_optimizer_resumes_as_its_own_state_would(steps):
    params, kwargs = mixed_params(), {"lr": 0.02, "clipping_update_period": 10}
    optimizer = ScaledAdam(params, **kwargs)
    for step in range(steps):
        take_step(optimizer, params, random_grads(params, step))
    saved = optimizer.state_dict()
    runs = []
    for state_dict in (saved, old_format(saved, period=4)):
        resumed_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
        resumed = ScaledAdam(resumed_params, **kwargs)
        resumed.load_state_dict(copy.deepcopy(state_dict))
        for step in range(steps, steps + 8):  # through the end of two size periods and a clipped step
            take_step(resumed, resumed_params, random_grads(params, step))
        runs.append((resumed_params, resumed.num_clipped()))
    (own, own_clipped), (old, old_clipped) = runs
    for a, b in zip(own, old, strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=0)
    assert own_clipped == old_clipped == 1  # step 12's spike, before or after the save


@pytest.mark.parametrize("segmented", [False, True])
def test_a_step_reads_back_only_the_rms_and_scale_steps_once_a_size_period(segmented):
    """On a GPU a value read back waits for the device: the clipping norm, its median and the factor stay
    there; each tensor's RMS and scale step come back together at a period's end (and the RMS once at the
    start)."""
    params = mixed_params()
    optimizer = ScaledAdam(params, lr=0.02, clipping_update_period=10, size_update_period=4)
    optimizer.segmented_sums = segmented  # CUDA's way: its lengths go to the device once
    with HostReads() as mode:
        for step in range(16):  # four periods, two threshold estimates, a clipped step
            take_step(optimizer, params, random_grads(params, step))
    assert Counter(mode.reads) == {
        ("tolist", "scaled_adam.py:_init_states"): 1,
        ("tolist", "scaled_adam.py:_sizes"): 4,
    } | ({("tensor", "scaled_adam.py:sums_of_products"): 1} if segmented else {})
    assert optimizer.num_clipped() == 1


def test_the_segmented_sums_cuda_takes_step_as_the_per_tensor_ones():
    runs = []
    for segmented in (False, True):
        params = mixed_params()
        optimizer = ScaledAdam(params, lr=0.02, clipping_update_period=10)
        optimizer.segmented_sums = segmented
        for step in range(9):  # two size periods
            take_step(optimizer, params, random_grads(params, step))
        runs.append(params)
    for a, b in zip(*runs, strict=True):
        torch.testing.assert_close(a.detach(), b.detach())


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="param_min_rms < param_max_rms"):
        ScaledAdam([tensor_with_rms(1.0)], param_min_rms=1.0, param_max_rms=0.5)
    with pytest.raises(ValueError, match="clipping_scale"):
        ScaledAdam([tensor_with_rms(1.0)], clipping_scale=0.0)


# --- a skip verdict on the device (found_inf) ---------------------------------------------------------------
def step_told(optimizer: ScaledAdam, params, grads, skip: bool) -> None:
    """A step told its verdict as the trainer tells it on a GPU: ``found_inf`` a 0-d tensor, 1.0 to skip."""
    optimizer.found_inf = torch.tensor(float(skip))
    try:
        take_step(optimizer, params, grads)
    finally:
        del optimizer.found_inf


def everything(optimizer: ScaledAdam, params) -> list[torch.Tensor]:
    """The parameters and every state tensor, copied."""
    state = [t for p in params for t in optimizer.state[p].values() if isinstance(t, torch.Tensor)]
    return [t.detach().clone() for t in [*params, *state]]


@pytest.mark.parametrize("segmented", [False, True])
def test_told_each_verdict_on_the_device_the_steps_taken_are_the_host_paths_to_the_bit(segmented):
    runs = []
    for device_skip in (False, True):
        params = mixed_params()
        optimizer = ScaledAdam(params, lr=0.02, clipping_update_period=10)
        optimizer.segmented_sums = segmented
        optimizer.device_skip = device_skip
        assert optimizer._step_supports_amp_scaling == device_skip
        for step in range(14):  # three size periods, two threshold estimates, step 12's clipped spike
            if device_skip:
                step_told(optimizer, params, random_grads(params, step), skip=False)
            else:
                take_step(optimizer, params, random_grads(params, step))
        runs.append((everything(optimizer, params), optimizer.num_clipped()))
    (host, host_clipped), (device, device_clipped) = runs
    for a, b in zip(host, device, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert host_clipped == device_clipped == 1


@pytest.mark.parametrize("segmented", [False, True])
@pytest.mark.parametrize("at", [0, 1, 3, 10])  # the first call, inside a size period, its end, an estimate
def test_a_skipped_step_changes_no_parameter_or_state_and_reads_nothing_back_inside_a_period(at, segmented):
    params = mixed_params()
    optimizer = ScaledAdam(params, lr=0.02, clipping_update_period=10)
    optimizer.device_skip, optimizer.segmented_sums = True, segmented
    for step in range(at):
        step_told(optimizer, params, random_grads(params, step), skip=False)
    before = everything(optimizer, params) if at else [p.detach().clone() for p in params]
    poisoned = random_grads(params, at)
    poisoned[0][0, 0], poisoned[2][3] = float("inf"), float("nan")

    with HostReads() as mode:
        step_told(optimizer, params, poisoned, skip=True)

    after = everything(optimizer, params) if at else [p.detach().clone() for p in params]
    assert len(after) == len(before) >= len(params)
    for a, b in zip(after, before, strict=True):  # the norms not yet recorded are NaN
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert all(optimizer.state[p]["step"] == at + 1 for p in params), "the host counts calls"
    # A period's end reads the sizes, and the verdict with them; the first call, the RMS; else nothing.
    sizes = {("tolist", "scaled_adam.py:_sizes"): 1} if at % 4 == 3 else {}
    first = {("tolist", "scaled_adam.py:_init_states"): 1} if at == 0 else {}
    lengths = {("tensor", "scaled_adam.py:sums_of_products"): 1} if at == 0 and segmented else {}
    assert Counter(mode.reads) == sizes | first | lengths
    if at == 10:
        assert float(optimizer.state[params[0]]["model_norm_threshold"]) == float("inf"), "no estimate"
    step_told(optimizer, params, random_grads(params, at + 1), skip=False)
    assert all(torch.isfinite(p).all() for p in params)
    assert not torch.equal(params[0].detach(), before[0]), "the next step applies"


def test_a_skipped_step_leaves_a_scalar_past_its_bound_for_the_next_step_to_clamp():
    """A scalar is clamped before its update (icefall's order), so a step can leave it past
    ``scalar_max``; a skipped step must not be the one that clamps it. With beta2 = 0 no bias correction
    depends on the step count, so the run with a skip in it is the host's run without that call."""
    runs = []
    for device_skip in (False, True):
        runaway = torch.nn.Parameter(torch.tensor([9.999]))
        optimizer = ScaledAdam([runaway], lr=0.5, betas=(0.9, 0.0), clipping_scale=None, scalar_max=10.0)
        optimizer.device_skip = device_skip
        grads = [-1.0, float("inf"), 0.0] if device_skip else [-1.0, 0.0]
        for grad in grads:
            told = grad != grad or abs(grad) == float("inf")
            if device_skip:
                step_told(optimizer, [runaway], [torch.tensor([grad])], skip=told)
            else:
                take_step(optimizer, [runaway], [torch.tensor([grad])])
            if grad == -1.0:
                past = float(runaway.detach())
                assert past > 10.0
            elif told:
                assert float(runaway.detach()) == past, "held past the bound"
        runs.append(float(runaway.detach()))
    assert runs[0] == runs[1]


def test_told_gradients_are_unscaled_as_gradscaler_unscales_them():
    """``GradScaler.step`` without ``unscale_`` tells the scale too: each gradient times the scale's
    float32 reciprocal, as ``unscale_`` makes it (the update itself hardly depends on the gradients'
    scale: a check of the step would pass with the scale ignored)."""
    params = mixed_params()
    optimizer = ScaledAdam(params, lr=0.02)
    grads = random_grads(params, 0)
    for p, g in zip(params, grads, strict=True):
        p.grad = g * 3.0
    scale = torch.tensor(3.0)
    told = optimizer._sanitized(params, torch.tensor(False), scale)
    inverse = scale.double().reciprocal().float()
    for p in params:
        assert torch.equal(told[p], p.grad * inverse)


def test_under_gradscaler_a_non_finite_step_is_skipped_on_the_device_and_the_scale_backs_off():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = ScaledAdam(model.parameters(), lr=0.02)
    optimizer.device_skip = True
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    inputs = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    scaler.scale(model(inputs).pow(2).mean()).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    before = everything(optimizer, list(model.parameters()))

    scaler.scale(model(inputs * float("inf")).pow(2).mean()).backward()
    scaler.step(optimizer)
    scaler.update()

    for a, b in zip(everything(optimizer, list(model.parameters())), before, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert scaler.get_scale() == 512.0
    assert not hasattr(optimizer, "found_inf") and not hasattr(optimizer, "grad_scale")


def test_a_copied_optimizer_steps_told_a_verdict():
    """torch's ``Optimizer`` copies and pickles only its defaults, state and groups: the buffers are made
    again."""
    params = mixed_params()
    optimizer = ScaledAdam(params, lr=0.02)
    optimizer.device_skip = True
    step_told(optimizer, params, random_grads(params, 0), skip=False)
    copied = copy.deepcopy(optimizer)
    copied.device_skip = True
    step_told(copied, copied.param_groups[0]["params"], random_grads(params, 1), skip=False)


def test_it_skips_on_the_device_by_default_only_on_cuda():
    p = tensor_with_rms(1.0)
    assert not ScaledAdam([p])._step_supports_amp_scaling  # the CPU: the host's read waits for nothing
    assert not ScaledAdam([{"params": []}, {"params": [p]}])._step_supports_amp_scaling  # an empty group
