import torch

from asr_pipeline.modules.feed_forward import FeedForward


def test_feed_forward_keeps_shape_and_treats_frames_independently():
    torch.manual_seed(0)
    ff = FeedForward(d_model=8, expansion=4, dropout=0.0)
    x = torch.randn(2, 5, 8)

    out = ff(x)
    out_of_one_frame = ff(x[:, 2:3])

    assert out.shape == (2, 5, 8)
    assert ff.linear_in.out_features == 32
    torch.testing.assert_close(out[:, 2:3], out_of_one_frame)
