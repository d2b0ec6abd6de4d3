"""Feed two training workers from one Ray dataset of a CTF file.

    pip install 'recordkit[ray]'
    python examples/ray_training_workers.py [--workdir DIR] [--batch-size 64]

Writes recordkit's demo corpus (2000 tagging sequences: a sparse one-hot word, 4 dense
features and a sparse tag per word; ``recordkit demo`` shows it) as a CTF file, reads it as
a Ray dataset with one block per CTF chunk, and splits the stream between two actors
with ``streaming_split``: one execution, each block going to one worker. Each worker turns
its Ray batches into engine minibatches (padded dense arrays with masks, sparse CSR
matrices) with ``minibatches_from_ray``, as a training step would take them, and reports
what it saw. In a real job the actors would be training workers (e.g. Ray Train's, which
pass each worker its shard the same way).
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import ray

from recordkit.cli.demo_corpus import DEMO_STREAMS, make_sequences
from recordkit.formats.ctf import write_ctf
from recordkit.integrations.ray import minibatches_from_ray, read_ctf

N_SEQUENCES = 2000


@ray.remote(num_cpus=0)  # the read tasks get the CPUs; the consumers mostly wait on them
class TrainingWorker:
    def __init__(self, rank: int):
        self.rank = rank

    def run(self, shard, batch_size: int) -> dict:
        keys, samples, steps, widest = [], 0, 0, 0
        for mb in minibatches_from_ray(shard, DEMO_STREAMS, batch_size=batch_size):
            features = mb["features"]          # dense: (sequences, T, 4) zero padded, with a mask
            words = mb["word"].csr             # sparse: (samples, 5000) CSR, rows sequence after sequence
            assert features.data.shape[1:] == features.mask.shape[1:] + (4,)
            assert words.shape == (int(mb["word"].lengths.sum()), 5000)
            # a real step would run the model here, e.g. on to_torch(mb) from recordkit.integrations.torch
            keys.extend(int(k) for k in mb.keys)
            samples += int(features.mask.sum())
            widest = max(widest, features.data.shape[1])
            steps += 1
        return {"rank": self.rank, "keys": keys, "samples": samples, "steps": steps, "widest": widest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to write the demo CTF file (default: a temporary directory)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per minibatch")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="recordkit-ray-")
    path = os.path.join(workdir, "demo.ctf")
    write_ctf(path, DEMO_STREAMS, make_sequences(N_SEQUENCES))

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        from ray.data import DataContext
        DataContext.get_current().enable_progress_bars = False
        ds = read_ctf(path, DEMO_STREAMS, chunk_size=32 << 10)   # small chunks: several blocks to share out
        shards = ds.streaming_split(2, equal=False)              # equal=True could drop rows to even them out
        workers = [TrainingWorker.remote(rank) for rank in range(2)]
        reports = ray.get([w.run.remote(shard, args.batch_size) for w, shard in zip(workers, shards)])
    finally:
        ray.shutdown()

    print(f"{path}: {N_SEQUENCES} sequences, read as one Ray block per CTF chunk")
    for r in reports:
        keys = np.array(r["keys"])
        print(f"worker {r['rank']}: {len(keys)} sequences, {r['samples']} samples in {r['steps']} minibatches "
              f"(longest sequence {r['widest']} samples; keys {keys.min() if len(keys) else '-'}.."
              f"{keys.max() if len(keys) else '-'})")
    everything = sorted(k for r in reports for k in r["keys"])
    if everything == [k * 10 for k in range(N_SEQUENCES)]:   # the demo's keys are 0, 10, 20, ...
        print(f"all {N_SEQUENCES} sequences seen once, split between {len(reports)} workers")
    else:
        raise SystemExit(f"expected every sequence once, got {len(everything)} keys")


if __name__ == "__main__":
    main()
