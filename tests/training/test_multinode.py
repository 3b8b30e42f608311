"""Multi-node training on one machine: two torchrun launches as two nodes (``nnodes=2``, a rendezvous on
127.0.0.1) end with exactly the weights of one node running two processes on the same global batch."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from asr_pipeline.training.config import resolve_config, save_json
from asr_pipeline.training.launch import launch_training

from .conftest import events, tiny_config

ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # the same intra-op threads per rank in both layouts


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(corpus, tokenizer_path, run_dir):
    config = tiny_config(corpus, tokenizer_path, run_dir, dvclive=False)
    config["optim"]["epochs"] = 2
    path = run_dir.parent / f"{run_dir.name}.json"
    save_json(resolve_config(config), path)
    return path


@pytest.mark.slow  # four torchrun processes per backend: ~1 min each
@pytest.mark.usefixtures("keep_torch_threads")
@pytest.mark.parametrize("backend", ["static", "c10d"])
def test_two_nodes_of_one_process_train_exactly_like_one_node_of_two(
    corpus, tokenizer_path, tmp_path, backend
):
    single = write_config(corpus, tokenizer_path, tmp_path / "single")
    launch_training(single, nproc_per_node=2, env=ONE_THREAD)

    nodes = write_config(corpus, tokenizer_path, tmp_path / "nodes")
    rendezvous = {"nnodes": 2, "rdzv_endpoint": f"127.0.0.1:{free_port()}", "rdzv_backend": backend,
                  "rdzv_id": f"test-{backend}"}  # fmt: skip
    with ThreadPoolExecutor(max_workers=2) as pool:  # each node is its own torchrun process
        launches = [
            pool.submit(launch_training, nodes, 1, env=ONE_THREAD, node_rank=rank, **rendezvous)
            for rank in (0, 1)
        ]
        for node in launches:
            node.result(timeout=300)

    summaries = [events(tmp_path / name, "summary")[0]["values"] for name in ("single", "nodes")]
    assert [s["world_size"] for s in summaries] == [2, 2]
    assert summaries[1]["parameter_digests"] == summaries[0]["parameter_digests"]
    assert len(set(summaries[0]["parameter_digests"])) == 1  # and every rank agrees
