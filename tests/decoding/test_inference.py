"""Log-probabilities over feature shards in padded batches, on the model's device, returned on the CPU."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import decode_and_score
from asr_pipeline.decoding.inference import SORT_WINDOW, iter_log_probs
from asr_pipeline.decoding.lexicon import build_lexicon
from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.decoding.tuning import tune_decoder
from asr_pipeline.models.registry import build_model
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.factories import NUM_BINS, char_tokenizer_model, random_sentences, write_corpus_shard


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


class RecordingModel(torch.nn.Module):
    """The tiny model, recording the input lengths of every batch it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.model, self.batches = tiny_model(), []

    def forward(self, features, lengths):
        self.batches.append(lengths.tolist())
        return self.model(features, lengths)


def test_the_model_runs_batches_of_similar_lengths_and_the_outputs_keep_shard_order(shards):
    model = RecordingModel()
    outputs = list(iter_log_probs(model, shards, batch_size=4))
    alone = [row for batch in iter_log_probs(model.model, shards, batch_size=1) for row in _rows(batch)]

    lengths = sorted(length for batch in model.batches for length in batch)
    assert model.batches == [lengths[0:4], lengths[4:8], lengths[8:]], "one window of 9, cut by length"
    for (id_a, lp_a), (id_b, lp_b) in zip(
        [row for batch in outputs for row in _rows(batch)], alone, strict=True
    ):
        assert id_a == id_b and torch.allclose(lp_a, lp_b, atol=1e-4), id_a


def test_the_sort_window_bounds_how_far_the_model_reads_ahead(shards):
    model = RecordingModel()
    outputs = list(iter_log_probs(model, shards, batch_size=4, sort_window=3))

    assert [len(batch) for batch in model.batches] == [3, 3, 3], "three windows of 3, one batch each"
    assert [len(batch.ids) for batch in outputs] == [3, 3, 3]
    assert [i for batch in outputs for i in batch.ids][:3] == ["a-000", "a-001", "a-002"]


def test_batching_by_length_leaves_the_tuned_values_and_every_score_unchanged(shards, tmp_path):
    """The cheaper forward pass changes no result on a fixed model: the same dev grid scores, the same chosen
    values, the same hypotheses and metrics as batching in shard order (tune_decoding and evaluate's work). An
    example's log-probs differ between batchings by float rounding only (~2e-6 on the demo's Zipformer), which
    here moves nothing; on the demo's 4-epoch run it moved one beam decision (docs/results/accuracy-per-minute.md)."""
    tokenizer = CTCTokenizer(char_tokenizer_model())
    corpus = "\n".join(random_sentences(200, seed=0)) + "\n"
    (tmp_path / "lexicon.txt").write_text(build_lexicon(corpus, tokenizer)[0], encoding="utf-8")
    (tmp_path / "lm.binary").write_bytes(build_kenlm(corpus, KenLMOptions(order=2))[1])
    resources = DecodingResources(word_lm=tmp_path / "lm.binary", lexicon=tmp_path / "lexicon.txt")
    grids = {"lexicon": {"lm_weight": [0.0, 0.5, 1.0], "word_score": [-1.0, 1.0]}, "lexicon_free": {}}
    torch.manual_seed(0)
    model = build_model("squeezeformer", "tiny", input_dim=NUM_BINS, vocab_size=tokenizer.vocab_size).eval()

    def tune_and_score(sort_window: int) -> tuple[list, str, dict]:
        batches = list(iter_log_probs(model, shards, batch_size=4, sort_window=sort_window))
        reports, decoders = [], {}
        for name, grid in grids.items():
            base = DecodingOptions(decoder=name, beam_width=8)
            result = tune_decoder(base, grid, lambda o: resources.build(o, tokenizer), batches)
            reports.append(result.report())
            decoders[name] = resources.build(result.options, tokenizer)
        return reports, *decode_and_score(batches, decoders)

    # A window of one batch: each batch holds the examples it held in shard order, as before the sorting.
    assert tune_and_score(sort_window=4) == tune_and_score(sort_window=SORT_WINDOW)


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
