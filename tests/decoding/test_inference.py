"""Log-probabilities over feature shards in padded batches, on the model's device, returned on the CPU."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.decoding.inference import iter_log_probs
from asr_pipeline.models.registry import build_model
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("inference")
    (root / "tok.model").write_bytes(char_tokenizer_model())
    tokenizer = CTCTokenizer.from_file(root / "tok.model")
    return [
        str(write_corpus_shard(root / "a.parquet", tokenizer, 5, seed=1, prefix="a")),
        str(write_corpus_shard(root / "b.parquet", tokenizer, 4, seed=2, prefix="b")),
    ]


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("squeezeformer", "tiny", input_dim=NUM_BINS, vocab_size=13, dropout=0.0).eval()


def test_every_example_comes_out_once_in_shard_order_with_padding_beyond_its_length(shards):
    outputs = list(iter_log_probs(tiny_model(), shards, batch_size=4))

    assert [len(batch.ids) for batch in outputs] == [4, 4, 1], "9 examples in batches of 4 across shards"
    assert [i for batch in outputs for i in batch.ids] == [f"a-{i:03d}" for i in range(5)] + [
        f"b-{i:03d}" for i in range(4)
    ]
    for batch in outputs:
        assert batch.log_probs.device.type == "cpu" and batch.log_probs.dtype == torch.float32
        assert batch.log_probs.shape[:2] == (len(batch.ids), int(batch.lengths.max()))  # (B, T', V)
        assert torch.allclose(batch.log_probs.exp().sum(-1), torch.ones(()), atol=1e-4)


def test_a_batch_gives_each_example_the_log_probs_it_gets_alone(shards):
    model = tiny_model()
    batched = [row for batch in iter_log_probs(model, shards, batch_size=9) for row in _rows(batch)]
    alone = [row for batch in iter_log_probs(model, shards, batch_size=1) for row in _rows(batch)]

    for (id_b, lp_b), (id_a, lp_a) in zip(batched, alone, strict=True):
        assert id_b == id_a and torch.allclose(lp_b, lp_a, atol=1e-4), id_b


def test_cpu_autocast_in_bf16_returns_float32_log_probs_close_to_float32(shards):
    model = tiny_model()
    exact = list(iter_log_probs(model, shards[:1], batch_size=5))
    reduced = list(iter_log_probs(model, shards[:1], batch_size=5, autocast_dtype=torch.bfloat16))

    assert reduced[0].log_probs.dtype == torch.float32
    # bf16 keeps 8 mantissa bits: log-probs of a few units move by a few hundredths, never more than 0.5.
    assert 0 < float((reduced[0].log_probs - exact[0].log_probs).abs().max()) < 0.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_log_probs_match_the_cpu_and_give_the_same_greedy_ids(shards):
    from asr_pipeline.decoding.greedy import greedy_decode

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = tiny_model()
    cpu = list(iter_log_probs(model, shards, batch_size=4))
    cuda = list(iter_log_probs(model.to("cuda"), shards, batch_size=4))

    for a, b in zip(cpu, cuda, strict=True):
        assert torch.equal(a.lengths, b.lengths)
        assert torch.allclose(a.log_probs, b.log_probs, atol=1e-4)
        assert greedy_decode(a.log_probs, a.lengths) == greedy_decode(b.log_probs, b.lengths)


def _rows(batch) -> list[tuple[str, torch.Tensor]]:
    return [(i, batch.log_probs[k, : batch.lengths[k]]) for k, i in enumerate(batch.ids)]
