"""Time OneFlow 0.9's C++ OFRecord reader + raw decoders on one data set (run under the oracle).

    /work/shared/tools/oneflow-oracle python benchmarks/oracle_ofrecord_read.py DIR --records 60000
        [--batch-size 256] [--parts 4] [--suffix 5] [--repeat 2] [--image-dim 784]

One timed read = construct ``flow.nn.OFRecordReader(DIR, batch_size, data_part_num, part_name_suffix_length,
random_shuffle=False)`` and two ``flow.nn.OFRecordRawDecoder``s (``images`` (dim,) float32, ``labels`` ()
int64), then pull ceil(records / batch_size) batches (the reader is endless: the last batch wraps into
the next epoch) and convert both decoded tensors of every batch to NumPy (``.numpy()``). Eager mode,
CPU (the reader's background thread prefetches up to 4 batches and parses each batch with a thread
pool). Fastest of --repeat reads; each read uses fresh modules.

Prints one JSON object: {"seconds", "batches", "records_pulled", "per_repeat", "oneflow", "threads"}.
"""
import argparse
import json
import math
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--suffix", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--image-dim", type=int, default=784)
    a = ap.parse_args()
    saved, sys.stdout = sys.stdout, sys.stderr  # keep stdout for the JSON
    import oneflow as flow
    sys.stdout = saved
    nb = math.ceil(a.records / a.batch_size)
    times = []
    checksum = 0.0
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        reader = flow.nn.OFRecordReader(a.dir, batch_size=a.batch_size, data_part_num=a.parts,
                                        part_name_suffix_length=a.suffix, random_shuffle=False)
        img = flow.nn.OFRecordRawDecoder("images", (a.image_dim,), flow.float32)
        lab = flow.nn.OFRecordRawDecoder("labels", (), flow.int64)
        for _ in range(nb):
            rec = reader()
            x = img(rec).numpy()
            y = lab(rec).numpy()
        times.append(time.perf_counter() - t0)
        checksum = float(x[-1, :4].sum()) + int(y[-1])
        del reader, img, lab, rec
    print(json.dumps({"seconds": min(times), "per_repeat": times, "batches": nb, "records_pulled": nb * a.batch_size,
                      "oneflow": flow.__version__, "threads": os.cpu_count(), "last_checksum": checksum}))


if __name__ == "__main__":
    main()
