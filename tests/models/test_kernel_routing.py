"""The models' hot spots go through asr_kernels: every op of the issue's table is called by a forward and
backward of each architecture's tiny model, the Triton path (interpreted here) gives the reference path's loss
and gradients, and a model layer traces under torch.compile without a graph break.

``tests/conftest.py`` turns Triton's interpreter on for the whole session, so ``kernels="triton"`` runs the
kernels on the CPU; ``auto`` (the default) takes the references here.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from asr_kernels import count_calls, kernels_choice, use_kernels
from asr_pipeline.models.w2v_bert import w2v_bert_config
from asr_pipeline.training.checkpoint import build_model_from_config
from asr_pipeline.training.config import DataConfig, ModelConfig, TrainConfig

VOCAB = 11

# The table, per architecture: the ops its forward and backward must reach.
ROUTED_OPS = {
    # conv_use_glu: Conformer's GLU gate, the option the Squeezeformer paper allows (its default is Swish).
    "squeezeformer": {"relative_shift", "padding_mask", "mask_channel_time", "residual_add_mask_time", "glu"},
    "zipformer": {
        "swoosh_l",
        "swoosh_r",
        "relative_shift",
        "padding_mask",
        "attention_mask_4d",
        "mask_time",
        "pairwise_downsample",
        "residual_add_mask_time",
    },
    # position_embeddings_type "relative": the Transformer-XL shift applies (HF's default, relative_key, has none)
    "w2v-bert": {"relative_shift", "attention_mask_4d", "mask_time", "glu", "residual_add_mask_time"},
}
OPTIONS = {
    "squeezeformer": {"conv_use_glu": True},
    "zipformer": {},
    "w2v-bert": {"position_embeddings_type": "relative"},
}


def tiny_model(architecture: str, seed: int = 0) -> torch.nn.Module:
    config = TrainConfig(
        data=DataConfig(train_manifests=[]),
        model=ModelConfig(
            architecture=architecture, variant="tiny", dropout=0.0, options=OPTIONS[architecture]
        ),
    )
    torch.manual_seed(seed)
    model, _ = build_model_from_config(config, VOCAB)
    return model


def input_dim(architecture: str) -> int:
    return w2v_bert_config("tiny").input_dim if architecture == "w2v-bert" else 80


def loss_and_gradients(model: torch.nn.Module, architecture: str) -> tuple[torch.Tensor, dict]:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(3, 61, input_dim(architecture), generator=generator)
    lengths = torch.tensor([61, 44, 23])
    log_probs, out_lengths = model(features, lengths)
    targets = torch.randint(1, VOCAB, (3, 4), generator=generator)
    loss = F.ctc_loss(
        log_probs.transpose(0, 1), targets, out_lengths, torch.tensor([4, 3, 2]), zero_infinity=True
    )
    model.zero_grad()
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("architecture", sorted(ROUTED_OPS))
def test_forward_and_backward_reach_every_op_of_the_table(architecture):
    model = tiny_model(architecture).train()
    with count_calls() as calls:
        loss, gradients = loss_and_gradients(model, architecture)
    assert torch.isfinite(loss) and gradients
    missing = ROUTED_OPS[architecture] - set(calls)
    assert not missing, f"{architecture} never called {sorted(missing)}; calls: {dict(calls)}"


@pytest.mark.parametrize("architecture", sorted(ROUTED_OPS))
def test_the_triton_path_gives_the_reference_paths_loss_and_gradients(architecture):
    # fp32 on both paths; the kernels differ from the references only in exp/log rounding and summation order
    # (each op's own parity test bounds it at ~1e-6), compounded over the layers of the tiny model.
    results = {}
    for choice in ("reference", "triton"):
        model = tiny_model(architecture).eval()  # eval: no dropout or feature masks, one function
        with use_kernels(choice), count_calls() as calls:
            results[choice] = loss_and_gradients(model, architecture)
        assert ROUTED_OPS[architecture] <= set(calls)
    (loss_ref, grads_ref), (loss_triton, grads_triton) = results["reference"], results["triton"]
    torch.testing.assert_close(loss_triton, loss_ref, rtol=1e-5, atol=1e-5)
    assert grads_triton.keys() == grads_ref.keys()
    for name, grad in grads_ref.items():
        torch.testing.assert_close(
            grads_triton[name], grad, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}"
        )


def kernel_nodes(output: torch.Tensor) -> set[str]:
    """The asr_kernels ops in ``output``'s autograd graph (their backward nodes name them:
    ``asr_kernels_<op>Backward``, a ``KernelOp``'s eager Function)."""
    names, stack, seen = set(), [output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        name = type(node).__name__
        if "asr_kernels_" in name:
            names.add(name.removeprefix("asr_kernels_").removesuffix("Backward"))
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_the_triton_path_really_runs_the_kernels():
    # A kernel op's backward node sits in the graph only when the kernel path ran.
    model = tiny_model("zipformer").eval()
    layer = model.stacks[0].layers[0]
    x, lengths = torch.randn(2, 9, model.config.encoder_dim[0], requires_grad=True), torch.tensor([9, 5])
    pos_emb = torch.randn(17, model.config.pos_dim)
    with use_kernels("reference"):
        assert kernel_nodes(layer(x, pos_emb, lengths)) == set()
    with use_kernels("triton"):
        nodes = kernel_nodes(layer(x, pos_emb, lengths))
    assert nodes == {"swoosh_l", "swoosh_r", "relative_shift", "mask_time", "residual_add_mask_time"}


@pytest.mark.parametrize("architecture", ["zipformer", "squeezeformer"])
def test_a_model_layer_compiles_without_a_graph_break_on_the_kernel_path(architecture):
    model = tiny_model(architecture).eval()
    if architecture == "zipformer":
        layer = model.stacks[0].layers[0]
        x, aux = torch.randn(2, 9, model.config.encoder_dim[0]), torch.randn(17, model.config.pos_dim)
    else:
        layer = model.blocks[0]
        x, aux = torch.randn(2, 9, model.config.d_model), model.positions(9)
    lengths = torch.tensor([9, 5])
    torch._dynamo.reset()
    with use_kernels("triton"):
        explanation = torch._dynamo.explain(layer)(x, aux, lengths)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_auto_takes_the_references_on_the_cpu():
    assert kernels_choice() == "auto"
    model = tiny_model("zipformer").eval()
    layer = model.stacks[0].layers[0]
    x = torch.randn(2, 9, model.config.encoder_dim[0], requires_grad=True)
    assert kernel_nodes(layer(x, torch.randn(17, model.config.pos_dim), torch.tensor([9, 5]))) == set()
