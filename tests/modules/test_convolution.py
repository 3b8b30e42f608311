import pytest
import torch

from asr_pipeline.modules.convolution import ConvolutionModule


def test_swish_gate_keeps_the_expanded_width_through_the_depthwise_conv():
    # Squeezeformer: D -> 2D -> Swish -> depthwise on 2D -> BN(2D) -> Swish -> 2D -> D
    conv = ConvolutionModule(d_model=8, kernel_size=5, expansion=2, use_glu=False)
    assert conv.depthwise.in_channels == conv.depthwise.groups == 16
    assert conv.norm.num_features == 16
    assert conv(torch.randn(2, 9, 8)).shape == (2, 9, 8)


def test_glu_gate_halves_the_expanded_width_as_in_conformer():
    conv = ConvolutionModule(d_model=8, kernel_size=5, expansion=2, use_glu=True)
    assert conv.pointwise_in.out_features == 16
    assert conv.depthwise.in_channels == 8
    assert conv(torch.randn(2, 9, 8)).shape == (2, 9, 8)


@pytest.mark.parametrize("use_glu", [False, True])
def test_padded_batch_matches_each_example_alone_in_eval_mode(use_glu):
    torch.manual_seed(0)
    conv = ConvolutionModule(d_model=6, kernel_size=7, use_glu=use_glu).eval()
    lengths = torch.tensor([11, 5])
    x = torch.randn(2, 11, 6)
    x[1, 5:] = 1e3

    with torch.no_grad():
        batched = conv(x, lengths)
        alone = conv(x[1:, :5])

    torch.testing.assert_close(batched[1, :5], alone[0])


def test_even_kernel_is_rejected():
    with pytest.raises(ValueError, match="odd"):
        ConvolutionModule(d_model=8, kernel_size=4)
