"""Fixtures the model tests share."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread: their ops are too small to share out, and on the shared 2-core box a
    second thread mostly waits (a tiny w2v-bert forward + backward: 5 ms on one thread, 10-600 ms on two under
    load; Paraformer's 60 overfit steps: 1.7 s against 19 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
