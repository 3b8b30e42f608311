"""Paraformer (Gao et al., 2022, "Paraformer: Fast and Accurate Parallel Transformer for Non-autoregressive
End-to-End Speech Recognition", arXiv:2206.08317), and an enhanced, Paraformer-v2-style variant.

    features (B, T, F) -> utterance CMVN -> 4x subsampling -> conformer blocks        -> hidden (B, T', D)
    hidden -> one query per token (alignment_mode, below)                             -> queries (B, U, D)
    queries -> N x [self-attention over tokens, cross-attention to hidden, FFN] -> Linear -> (B, U, V)

Every token comes out of one parallel decoder pass; decoding is the argmax at each of a hypothesis's U
positions, with no CTC collapse. The encoder is Conformer's (Gulati et al., 2020: FFN/2, rel-pos MHSA, conv
module, FFN/2, LayerNorm) as in FunASR's conformer Paraformer recipe; the decoder's self-attention uses the
same relative positions over tokens.

Where the decoder queries come from (``alignment_mode``); only training knows the reference, so each mode
also says what it does without one:

    mode      training (U reference tokens)                          inference
    cif       CIF over the encoder, weights scaled to sum to U        CIF, the count from its own weights
                                                                      (plus the 0.45 tail weight)
    viterbi   mean of each token's frames in the CTC forced alignment  mean of each greedy-CTC segment
              (a row too short to align: the uniform split)
    greedy    mean of each greedy-CTC segment, where the greedy path   mean of each greedy-CTC segment
              has U tokens; the viterbi queries otherwise
    uniform   the frames split evenly among the U tokens              split evenly among as many tokens
                                                                      as the greedy CTC path has
(``models.cif`` and ``models.paraformer_queries`` build them.) The greedy-CTC segments are the best path
without a reference, so the CTC modes decode from them; "greedy" trains on them wherever they already have
the reference's length, so the decoder sees at training what it gets at inference. The non-CIF modes read the CTC head on the final encoder output (``ctc_weight`` must then be > 0); the
"cif" mode has the CIF predictor (Dong & Xu, 2020) and its quantity loss, the others have neither.

Training (``forward`` with targets) adds, per utterance:
    ce           label-smoothed cross-entropy of the decoder over the reference tokens
    quantity     |sum of CIF weights - U| ("cif" mode; weight ``quantity_weight``, the paper's 1.0)
    ctc          CTC on the final encoder (``ctc_weight``; 0 removes the head in the "cif" mode)
and with ``enhanced`` (the reference trainer's --paraformer-enhanced, in the spirit of Paraformer-v2, 2024,
which also leans on CTC): ``shallow_ctc`` (CTC on encoder block ``shallow_ctc_layer``), ``boundary`` (per-frame BCE: does a
token end here, i.e. does the CIF fire, in the "cif" mode; does one start, in the CTC forced alignment,
otherwise) and ``refine`` (cross-entropy of a second decoder pass whose inputs are the queries plus the
embeddings of the first pass's argmax). A head whose weight is 0 is not built; without ``refine`` there is
no second pass. ``loss = ce + sum of weight x component``.

Glancing LM sampling (Gao et al.'s GLM sampler), in training mode only: a first decoder pass without gradient, then
``floor(glancing_ratio x wrong tokens)`` of each utterance's decoder inputs, drawn at random, are replaced by
the reference tokens' embeddings for the pass that is trained (``paraformer_losses.glancing_mask``).

Dimension legend: B batch, T input frames, F feature bins, T' encoder frames, D d_model, U tokens,
V vocabulary (the CTC one: blank included; the blank is never a decoder target, and its column of every
decoder output is -inf, so the decoder cannot predict it).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from asr_kernels.residual_add_mask import residual_add_mask_time
from asr_pipeline.models.cif import CIFOutput, CIFPredictor, fire_counts, quantity_loss
from asr_pipeline.models.paraformer_losses import (
    boundary_loss,
    ctc_per_utterance,
    ctc_token_starts,
    glancing_mask,
    token_cross_entropy,
)
from asr_pipeline.models.paraformer_queries import greedy_queries, uniform_queries, viterbi_queries
from asr_pipeline.models.paraformer_spec import (  # the config and sizes live in the torch-free spec
    ALIGNMENT_MODES,
    LOSS_WEIGHTS,
    SIZES,
    ParaformerConfig,
    paraformer_config,
)
from asr_pipeline.modules.attention import RelativePositionalEncoding, RelPositionMultiHeadAttention
from asr_pipeline.modules.conformer import ConformerBlock
from asr_pipeline.modules.cross_attention import CrossAttention
from asr_pipeline.modules.feed_forward import FeedForward
from asr_pipeline.modules.masks import normalize_input, padding_mask
from asr_pipeline.modules.subsampling import DepthwiseSeparableConvSubsampling


def fit_length(x: Tensor, length: int) -> Tensor:
    """(B, U', ...) -> (B, length, ...): zero-padded or cut along dim 1."""
    if x.size(1) >= length:
        return x[:, :length]
    padding = x.new_zeros((x.size(0), length - x.size(1), *x.shape[2:]))
    return torch.cat((x, padding), dim=1)


class DecoderBlock(nn.Module):
    """Pre-LN: + self-attention over the token queries (relative positions, padded tokens masked),
    + cross-attention to the encoder frames (padded frames masked), + FFN."""

    def __init__(self, config: ParaformerConfig) -> None:
        super().__init__()
        d, p = config.d_model, config.dropout
        self.self_attention_norm = nn.LayerNorm(d)
        self.self_attention = RelPositionMultiHeadAttention(d, config.num_heads, p)
        self.cross_attention_norm = nn.LayerNorm(d)
        self.cross_attention = CrossAttention(d, config.num_heads, p)
        self.ff_norm, self.ff = nn.LayerNorm(d), FeedForward(d, config.ff_expansion, p)
        self.dropout = nn.Dropout(p)

    def forward(
        self, x: Tensor, lengths: Tensor, pos_emb: Tensor, memory: Tensor, memory_mask: Tensor
    ) -> Tensor:
        """x: (B, U, D) token states; lengths: (B,) tokens; pos_emb: (2U-1, D); memory: (B, T', D);
        memory_mask: (B, T') True at padding."""
        token_mask = padding_mask(lengths, x.size(1))  # (B, U)
        x = self._add(x, self.self_attention(self.self_attention_norm(x), pos_emb, token_mask), lengths)
        x = self._add(x, self.cross_attention(self.cross_attention_norm(x), memory, memory_mask), lengths)
        return self._add(x, self.ff(self.ff_norm(x)), lengths)  # (B, U, D)

    def _add(self, x: Tensor, branch: Tensor, lengths: Tensor) -> Tensor:
        return residual_add_mask_time(x, self.dropout(branch), lengths)


class ParaformerDecoder(nn.Module):
    """Token queries -> (B, U, V) float32 log-probs, the blank's column -inf."""

    def __init__(self, config: ParaformerConfig, blocks: nn.ModuleList) -> None:
        super().__init__()
        self.blocks = blocks
        self.positions = RelativePositionalEncoding(config.d_model)
        self.norm = nn.LayerNorm(config.d_model)
        self.output = nn.Linear(config.d_model, config.vocab_size)
        self.blank_id = config.blank_id

    def forward(self, queries: Tensor, lengths: Tensor, memory: Tensor, memory_lengths: Tensor) -> Tensor:
        """queries: (B, U, D); lengths: (B,) tokens; memory: (B, T', D); memory_lengths: (B,) frames."""
        batch, length, _ = queries.shape
        if length == 0:  # no utterance has a token: nothing to attend over
            return queries.new_zeros(batch, 0, self.output.out_features, dtype=torch.float32)
        pos_emb = self.positions(length)  # (2U-1, D)
        memory_mask = padding_mask(memory_lengths, memory.size(1))  # (B, T')
        x = queries
        for block in self.blocks:
            x = block(x, lengths, pos_emb, memory, memory_mask)
        # float32 log-probs even under bf16/fp16 autocast, as the CTC models' outputs.
        logits = self.output(self.norm(x)).float()  # (B, U, V)
        blank = torch.tensor([self.blank_id], device=logits.device)
        return logits.index_fill(-1, blank, float("-inf")).log_softmax(dim=-1)


class Paraformer(nn.Module):
    def __init__(
        self,
        config: ParaformerConfig,
        subsampling: nn.Module,
        blocks: nn.ModuleList,
        decoder: ParaformerDecoder,
        predictor: nn.Module | None,
        ctc_head: nn.Module | None,
        shallow_ctc_head: nn.Module | None,
        boundary_head: nn.Module | None,
        token_embedding: nn.Module | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.subsampling = subsampling
        self.input_dropout = nn.Dropout(config.dropout)
        self.positions = RelativePositionalEncoding(config.d_model)
        self.blocks = blocks
        self.decoder = decoder
        self.predictor = predictor  # "cif" mode
        self.ctc_head = ctc_head  # CTC on the final encoder: ctc_weight > 0 or a non-CIF mode
        self.shallow_ctc_head = shallow_ctc_head  # enhanced
        self.boundary_head = boundary_head  # enhanced: one logit per frame
        self.token_embedding = token_embedding  # decoder inputs for glancing and refinement

    @property
    def refines(self) -> bool:
        return self.config.head_weight("refine") > 0

    def output_lengths(self, feature_lengths: Tensor) -> Tensor:
        """Encoder frames: ceil(L / 4)."""
        return DepthwiseSeparableConvSubsampling.output_lengths(feature_lengths)

    def encode(self, features: Tensor, feature_lengths: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(B, T, F) -> hidden (B, T', D), (B,) lengths, and the shallow CTC block's output (enhanced)."""
        if features.dim() != 3 or features.size(-1) != self.config.input_dim:
            raise ValueError(
                f"expected features of shape (B, T, {self.config.input_dim}), got {tuple(features.shape)}; "
                "check that the feature extractor and the model config agree on input_dim"
            )
        features = normalize_input(features, feature_lengths, self.config.input_normalization)  # (B, T, F)
        x, lengths = self.subsampling(features, feature_lengths)  # (B, T', D)
        x = self.input_dropout(x)
        pos_emb = self.positions(x.size(1))  # (2T'-1, D)
        mask = padding_mask(lengths, x.size(1))  # (B, T')
        shallow = None
        for number, block in enumerate(self.blocks, start=1):
            x = block(x, pos_emb, lengths, mask)
            if number == self.config.shallow_layer:
                shallow = x
        return x, lengths, shallow

    def forward(
        self,
        features: Tensor,
        feature_lengths: Tensor,
        targets: Tensor | None = None,
        target_lengths: Tensor | None = None,
    ) -> tuple[Tensor, Tensor] | dict[str, Tensor]:
        """features: (B, T, F); feature_lengths: (B,). Without targets, decoding: (B, U, V) float32 token
        log-probs of the final (refined, when enhanced) pass, blank at -inf, and (B,) int64 token counts.
        With targets (B, U) and target_lengths (B,): a dict of per-utterance (B,) "loss" and components,
        with the (B, U, V) "token_log_probs" they came from and "token_lengths" (= target_lengths)."""
        if (targets is None) != (target_lengths is None):
            raise ValueError("pass targets and target_lengths together (training) or neither (decoding)")
        hidden, lengths, shallow = self.encode(features, feature_lengths)
        ctc_log_probs = None
        if self.ctc_head is not None:
            ctc_log_probs = self.ctc_head(hidden).float().log_softmax(dim=-1)  # (B, T', V)
        if targets is None:
            return self._decode(hidden, lengths, ctc_log_probs)
        return self._losses(hidden, lengths, shallow, ctc_log_probs, targets, target_lengths)

    def _decode(self, hidden: Tensor, lengths: Tensor, ctc_log_probs: Tensor | None) -> tuple[Tensor, Tensor]:
        mode, blank = self.config.alignment_mode, self.config.blank_id
        if mode == "cif":
            predicted = self.predictor(hidden, lengths)
            queries, token_lengths = predicted.embeddings, predicted.token_lengths
        else:
            queries, _, token_lengths = greedy_queries(hidden, lengths, ctc_log_probs.detach(), blank)
            if mode == "uniform":
                queries = uniform_queries(hidden, lengths, token_lengths)
        token_lengths = token_lengths.to(device=hidden.device, dtype=torch.int64)
        # At least one column, as the query helpers give: a batch where nothing fires is (B, 1, V), lengths 0.
        queries = fit_length(queries, max(1, int(token_lengths.max())) if token_lengths.numel() else 1)
        log_probs = self.decoder(queries, token_lengths, hidden, lengths)  # (B, U, V)
        if self.refines:
            hypothesis = self.token_embedding(log_probs.argmax(dim=-1)).to(queries.dtype)  # (B, U, D)
            log_probs = self.decoder(queries + hypothesis, token_lengths, hidden, lengths)
        return log_probs, token_lengths

    def _training_queries(
        self,
        hidden: Tensor,
        lengths: Tensor,
        ctc_log_probs: Tensor | None,
        targets: Tensor,
        target_lengths: Tensor,
    ) -> tuple[Tensor, CIFOutput | None]:
        """(B, U, D) queries, one per reference token, and the CIF predictor's output ("cif" mode)."""
        mode, blank = self.config.alignment_mode, self.config.blank_id
        if mode == "cif":
            predicted = self.predictor(hidden, lengths, target_lengths)
            return fit_length(predicted.embeddings, targets.size(1)), predicted
        if mode == "uniform":
            return fit_length(uniform_queries(hidden, lengths, target_lengths), targets.size(1)), None
        alignment = ctc_log_probs.detach()  # the path is discrete: no gradient through it anyway
        queries = viterbi_queries(hidden, lengths, alignment, targets, target_lengths, blank)
        queries = fit_length(queries, targets.size(1))
        if mode == "greedy":
            greedy, _, counts = greedy_queries(hidden, lengths, alignment, blank)
            agrees = (counts.to(target_lengths.device) == target_lengths)[:, None, None]  # (B, 1, 1)
            queries = torch.where(agrees, fit_length(greedy, targets.size(1)), queries)
        return queries, None

    def _losses(
        self,
        hidden: Tensor,
        lengths: Tensor,
        shallow: Tensor | None,
        ctc_log_probs: Tensor | None,
        targets: Tensor,
        target_lengths: Tensor,
    ) -> dict[str, Tensor]:
        config = self.config
        queries, predicted = self._training_queries(hidden, lengths, ctc_log_probs, targets, target_lengths)
        first_pass = None
        glance = torch.zeros(targets.shape, dtype=torch.bool, device=targets.device)  # (B, U)
        if self.training and config.glancing_ratio > 0:
            with torch.no_grad():
                first_pass = self.decoder(queries, target_lengths, hidden, lengths)  # (B, U, V)
            glance = glancing_mask(first_pass.argmax(dim=-1), targets, target_lengths, config.glancing_ratio)
        inputs = queries
        if self.token_embedding is not None:
            # Always through the embedding, even with nothing glanced at (evaluation, a perfect first pass):
            # every parameter then takes part in every training graph, as DDP requires.
            target_embeddings = self.token_embedding(targets).to(queries.dtype)  # (B, U, D)
            inputs = torch.where(glance[..., None], target_embeddings, queries)
        log_probs = self.decoder(inputs, target_lengths, hidden, lengths)  # (B, U, V)
        first_pass = log_probs.detach() if first_pass is None else first_pass
        blank, smoothing = config.blank_id, config.label_smoothing
        components = {"ce": token_cross_entropy(log_probs, targets, target_lengths, smoothing, blank)}
        if predicted is not None:
            components["quantity"] = quantity_loss(predicted.quantity, target_lengths)
        if ctc_log_probs is not None and config.ctc_weight > 0:
            components["ctc"] = ctc_per_utterance(ctc_log_probs, lengths, targets, target_lengths, blank)
        if self.shallow_ctc_head is not None:
            shallow_log_probs = self.shallow_ctc_head(shallow).float().log_softmax(dim=-1)  # (B, T', V)
            components["shallow_ctc"] = ctc_per_utterance(
                shallow_log_probs, lengths, targets, target_lengths, blank
            )
        if self.boundary_head is not None:
            components["boundary"] = self._boundary_loss(
                hidden, lengths, predicted, ctc_log_probs, targets, target_lengths
            )
        if self.refines:
            refined_inputs = queries + self.token_embedding(first_pass.argmax(dim=-1)).to(queries.dtype)
            log_probs = self.decoder(refined_inputs, target_lengths, hidden, lengths)
            components["refine"] = token_cross_entropy(log_probs, targets, target_lengths, smoothing, blank)
        loss = components["ce"]
        for name, value in components.items():
            if name != "ce":
                loss = loss + config.head_weight(name) * value
        return {"loss": loss, **components, "token_log_probs": log_probs, "token_lengths": target_lengths}

    def _boundary_loss(
        self,
        hidden: Tensor,
        lengths: Tensor,
        predicted: CIFOutput | None,
        ctc_log_probs: Tensor | None,
        targets: Tensor,
        target_lengths: Tensor,
    ) -> Tensor:
        """(B,) BCE of the per-frame boundary logits: CIF fires ("cif" mode) or forced-alignment token
        starts (the CTC modes; an utterance too short to align contributes 0)."""
        logits = self.boundary_head(hidden).squeeze(-1)  # (B, T')
        if predicted is not None:
            boundaries = fire_counts(predicted.alphas, self.config.cif_threshold) > 0  # (B, T')
            return boundary_loss(logits, boundaries, lengths)
        boundaries, aligned = ctc_token_starts(
            ctc_log_probs, lengths, targets, target_lengths, self.config.blank_id
        )
        return boundary_loss(logits, boundaries, lengths) * aligned


def build_paraformer(config: ParaformerConfig) -> Paraformer:
    """Assemble a Paraformer from its blocks; every named size below is this with other numbers."""
    d, vocab = config.d_model, config.vocab_size
    cif_mode = config.alignment_mode == "cif"
    predictor = None
    if cif_mode:
        predictor = CIFPredictor(
            d, config.predictor_kernel_size, config.cif_threshold, config.cif_tail_threshold, config.dropout
        )
    uses_embedding = config.glancing_ratio > 0 or config.head_weight("refine") > 0
    return Paraformer(
        config,
        subsampling=DepthwiseSeparableConvSubsampling(config.input_dim, config.subsampling_channels or d, d),
        blocks=nn.ModuleList(
            ConformerBlock(d, config.num_heads, config.ff_expansion, config.conv_kernel_size, config.dropout)
            for _ in range(config.num_layers)
        ),
        decoder=ParaformerDecoder(
            config, nn.ModuleList(DecoderBlock(config) for _ in range(config.decoder_layers))
        ),
        predictor=predictor,
        ctc_head=nn.Linear(d, vocab) if config.ctc_weight > 0 or not cif_mode else None,
        shallow_ctc_head=nn.Linear(d, vocab) if config.head_weight("shallow_ctc") > 0 else None,
        boundary_head=nn.Linear(d, 1) if config.head_weight("boundary") > 0 else None,
        token_embedding=nn.Embedding(vocab, d) if uses_embedding else None,
    )


def paraformer_base(**overrides: object) -> Paraformer:
    return build_paraformer(paraformer_config("base", **overrides))


def paraformer_tiny(**overrides: object) -> Paraformer:
    return build_paraformer(paraformer_config("tiny", **overrides))


def paraformer_demo(**overrides: object) -> Paraformer:
    return build_paraformer(paraformer_config("demo", **overrides))


__all__ = [  # the config and sizes are models.paraformer_spec's, re-exported for the model's users
    "ALIGNMENT_MODES",
    "LOSS_WEIGHTS",
    "SIZES",
    "DecoderBlock",
    "Paraformer",
    "ParaformerConfig",
    "ParaformerDecoder",
    "build_paraformer",
    "fit_length",
    "paraformer_base",
    "paraformer_config",
    "paraformer_demo",
    "paraformer_tiny",
]
