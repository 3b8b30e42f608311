"""Which shapes torchaudio's ``cuda_ctc_decoder`` survives on this GPU, each in its own process.

On an H100 (torchaudio 2.11) the decoder aborted the process with ``cudaErrorIllegalAddress`` at beam 16
(pytorch/audio#3754: an out-of-bounds access in its kernels that shows at larger beams on older GPUs and at
smaller ones on Hopper). One child process per (beam, batch, frames) decodes random log-probs over the demo's
vocabulary, so one abort does not end the probe; the table says which shapes decode.

    python benchmarks/probe_cuda_ctc_decoder.py --beams 1 2 4 8 10 16 --batches 1 16 --frames 50 400
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = """
import sys, torch
from torchaudio.models.decoder import cuda_ctc_decoder
beam, batch, frames, vocab = map(int, sys.argv[1:5])
torch.manual_seed(0)
log_probs = torch.randn(batch, frames, vocab, device="cuda").log_softmax(-1)
lengths = torch.full((batch,), frames, dtype=torch.int32, device="cuda")
decoder = cuda_ctc_decoder([str(i) for i in range(vocab)], nbest=1, beam_size=beam, blank_skip_threshold=0.95)
found = decoder(log_probs, lengths)
torch.cuda.synchronize()
print(len(found), sum(len(h[0].tokens) for h in found))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 2, 4, 8, 10, 16, 32])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--frames", type=int, nargs="+", default=[50, 400])
    parser.add_argument("--vocab", type=int, default=257)
    args = parser.parse_args()
    print(f"{'beam':>5s} {'batch':>6s} {'frames':>7s}  result")
    for beam in args.beams:
        for batch in args.batches:
            for frames in args.frames:
                shape = [str(v) for v in (beam, batch, frames, args.vocab)]
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, *shape], capture_output=True, text=True, timeout=120
                )
                last = (done.stdout.strip() or done.stderr.strip() or "?").splitlines()[-1]
                result = "ok" if done.returncode == 0 else f"exit {done.returncode}: {last[-90:]}"
                print(f"{beam:5d} {batch:6d} {frames:7d}  {result}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
