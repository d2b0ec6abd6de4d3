"""``recordkit prepare cifar10|mnist SRC OUT``: SINGA's create_data programs."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("prepare", help="write SINGA's CIFAR-10 / MNIST stores from the original binary files",
                       description="cifar10: SRC holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin "
                                   "(the 'CIFAR-10 binary version'); writes train_data.bin, test_data.bin and "
                                   "image_mean.bin as SINGA's examples/cifar10/create_data did. mnist: SRC holds the "
                                   "IDX files (train-images-idx3-ubyte, ... optionally .gz); writes train_data.bin "
                                   "and test_data.bin. Both are KVFile stores of RecordProto records.")
    p.add_argument("dataset", choices=["cifar10", "mnist"], help="which data set SRC_DIR holds")
    p.add_argument("src", metavar="SRC_DIR", help="the directory holding the original binary files")
    p.add_argument("out", metavar="OUT_DIR", help="where to write the SINGA stores (created if missing)")
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.formats.singa import prepare
    fn = prepare.prepare_cifar10 if args.dataset == "cifar10" else prepare.prepare_mnist
    written = fn(args.src, args.out, progress=True)
    for path, count in written.items():
        print(f"{path}: {count} records", file=sys.stderr)
    return 0
