"""``recordkit read``: read like a training loop and report samples per second."""
from __future__ import annotations

import json
import sys
import time

from recordkit.cli import sources
from recordkit.cli.cat import report_tolerated


def register(sub) -> None:
    p = sub.add_parser("read", help="read minibatches like a training loop and print samples/s",
                       description="Read PATH (several paths: one composite source, joined by sequence id or "
                                   "position) in minibatches and print throughput. With --singa-conf: the input "
                                   "layer of a SINGA job.conf instead of PATH.")
    add_read_arguments(p, singa=True)
    p.add_argument("--report", action="store_true",
                   help="also print how well sweep 0's order mixes (position displacement, correlation with "
                        "file order, consecutive sequences from the same chunk) for the chosen window and for 1, 4, 16, 64 chunks and the whole data set, "
                        "computed from the randomizer's orders alone")
    from recordkit.cli import argtypes
    g = p.add_argument_group("images (docs: Training loops, Images)")
    g.add_argument("--images", default=None, metavar="FIELD",
                   help="read the encoded images of FIELD (an OFRecord/TFRecord bytes feature, a Parquet binary or "
                        "Image column, WebDataset member extensions such as jpg,png) through recordkit's image stage "
                        "(decode, random-resized-crop, flip, normalize; --seed seeds it) in batches of --mb-size "
                        "images, and print images/s; where FIELD is a bytes stream of the data set, through the "
                        "minibatch source (--randomize, partitions, --save-state/--resume with the same crops)")
    g.add_argument("--image-size", type=argtypes.positive_int, default=224, metavar="PIXELS",
                   help="side of the square images the stage makes (default 224)")
    p.set_defaults(run=run, check=check)


def add_read_arguments(p, singa: bool = False) -> None:
    """The arguments of ``read``, which ``plan`` takes too (same data, same order, same memory);
    ``singa``: also ``--singa-conf`` (then PATH and --mb-size may be left out)."""
    from recordkit.cli import argtypes
    p.add_argument("path", nargs="*" if singa else "+", metavar="PATH",
                   help="a CTF, CBF or OFRecord input; several: their streams joined into one source")
    sources.add_ctf_arguments(p)
    p.add_argument("--mb-size", type=argtypes.positive_int, required=not singa, metavar="N",
                   help="minibatch size in samples" + (" (with --singa-conf: the layer's batchsize)" if singa else ""))
    if singa:
        g = p.add_argument_group("SINGA job configuration")
        g.add_argument("--singa-conf", metavar="JOB.CONF", default=None,
                       help="read the input layer of this SINGA 0.x job.conf (kRecordInput, kCSVInput, kShardData): "
                            "its store, shape, mean/std normalisation and batchsize")
        g.add_argument("--phase", default=None, metavar="PHASE",
                       help="the layer's phase: train (the default), test, val, deploy (or kTrain, kTest, ...)")
        g.add_argument("--layer", default=None, metavar="NAME", help="the input layer by name (default: the only "
                                                                   "input layer of --phase)")
        g.add_argument("--singa-root", default=None, metavar="DIR",
                       help="resolve the job's relative store paths against DIR (default: the current directory, "
                            "as SINGA did)")
    p.add_argument("--randomize", action="store_true", help="CNTK block randomization (default: file order)")
    p.add_argument("--window", type=argtypes.positive_int, default=None, metavar="CHUNKS",
                   help="randomization window in chunks (default: the whole data set; either is reduced "
                        "when it does not fit --max-memory)")
    p.add_argument("--window-samples", type=argtypes.positive_int, default=None, metavar="SAMPLES",
                   help="randomization window in samples instead")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="randomization seed (sweep k uses seed + k)")
    p.add_argument("--max-memory", default="auto", metavar="SIZE",
                   help="bound on the chunks held at once (window + prefetch), e.g. 512MB or 2GiB; the window is "
                        "reduced to fit and the choice reported (default auto: 25%% of the memory available; "
                        "none: unbounded)")
    ends = p.add_mutually_exclusive_group()
    ends.add_argument("--sweeps", type=argtypes.positive_int, default=None, metavar="K",
                      help="read K sweeps (default 1)")
    ends.add_argument("--max-samples", type=argtypes.positive_int, default=None, metavar="N",
                      help="stop after N samples")
    p.add_argument("--partitions", type=argtypes.positive_int, default=1, metavar="N",
                   help="split the data among N workers")
    p.add_argument("--partition-index", type=argtypes.non_negative_int, default=0, metavar="I",
                   help="read worker I's share (0 <= I < N)")
    p.add_argument("--partition-by", choices=["auto", "samples", "chunks"], default="auto",
                   help="samples: equal samples of every sweep; chunks: whole chunks per worker, so each parses "
                        "and fetches only its own (engine.ChunkPartition; scales better when randomized); auto "
                        "(default): chunks for a randomized read of remote inputs, else samples")
    p.add_argument("--frame-mode", action="store_true", help="single-sample sequences packed as frames")
    p.add_argument("--truncation-length", type=argtypes.non_negative_int, default=0, metavar="L",
                   help="truncated BPTT length (0: off)")
    p.add_argument("--epoch-size", type=argtypes.positive_int, default=None, metavar="SAMPLES",
                   help="CNTK epochs of this many samples: no minibatch crosses an epoch end")
    g = p.add_argument_group("mixing several PATHs (README: Weighted mixing), instead of joining them")
    mix = g.add_mutually_exclusive_group()
    mix.add_argument("--weights", type=argtypes.proportions, default=None, metavar="W1,W2,...",
                     help="draw each sweep's sequences from the PATHs in these proportions")
    mix.add_argument("--repeats", type=argtypes.proportions, default=None, metavar="R1,R2,...",
                     help="each sweep takes R times each PATH's sequences (0.5: half, a new half each sweep)")
    g.add_argument("--sweep-sequences", type=argtypes.positive_int, default=None, metavar="N",
                   help="with --weights: sequences per sweep (default: all PATHs' together)")
    g = p.add_argument_group("checkpoints (README: Elastic resume)")
    g.add_argument("--stop-after", type=argtypes.positive_int, default=None, metavar="MINIBATCHES",
                   help="stop after this many minibatches (as a job that is interrupted)")
    g.add_argument("--save-state", default=None, metavar="FILE",
                   help="write the source's checkpoint (JSON) here when the read stops")
    g.add_argument("--resume", nargs="+", default=None, metavar="STATE.json",
                   help="continue from checkpoints: one state resumes exactly; the states of every partition "
                        "of a job (in any order) resume on --partitions N of any number (elastic resume)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def check(parser, args) -> None:
    """What no single option can say: the worker index against the workers, exclusive modes."""
    from recordkit.cli import argtypes
    argtypes.check_streams(parser, args)
    if getattr(args, "singa_conf", None) is not None:
        if args.path:
            parser.error("argument PATH: not allowed with --singa-conf (the job.conf names the store)")
        if args.stream:
            parser.error("argument --stream: not allowed with --singa-conf (the layer's streams are features "
                         "and label)")
    elif not args.path:
        parser.error("the following arguments are required: PATH (or --singa-conf JOB.CONF)")
    elif args.mb_size is None:
        parser.error("the following arguments are required: --mb-size")
    given = args.weights if getattr(args, "weights", None) is not None else getattr(args, "repeats", None)
    if given is not None and len(given) != len(args.path or []):
        parser.error(f"argument {'--weights' if args.weights is not None else '--repeats'}: {len(given)} values "
                     f"for {len(args.path or [])} PATHs (one per PATH)")
    if getattr(args, "sweep_sequences", None) is not None and getattr(args, "weights", None) is None:
        parser.error("argument --sweep-sequences: only with --weights")
    if getattr(args, "images", None) is not None:
        if len(args.path or []) != 1:
            parser.error("argument --images: one PATH (the data set holding the images)")
        for name in ("weights", "repeats", "singa_conf"):
            if getattr(args, name, None):
                parser.error(f"argument --{name.replace('_', '-')}: not allowed with --images")
    if args.partition_index >= args.partitions:
        parser.error(f"argument --partition-index: {args.partition_index} is not below --partitions "
                     f"{args.partitions} (workers are numbered 0..{args.partitions - 1})")
    if args.frame_mode and args.truncation_length:
        parser.error("argument --frame-mode: not allowed with --truncation-length (frame mode packs "
                     "single-sample sequences, truncated BPTT cuts long ones)")
    if args.window is not None and args.window_samples is not None:
        parser.error("argument --window-samples: not allowed with --window (one window: in chunks or in samples)")
    if (args.window is not None or args.window_samples is not None) and not args.randomize:
        parser.error("argument --window: only with --randomize (file order has no randomization window)")


def build_source(args, readers=None, images=None):
    """(readers, MinibatchSource) of the arguments (``readers``: already opened; ``images``: the
    source's image stages)."""
    from recordkit.engine.source import MinibatchSource
    if readers is not None:
        pass
    elif getattr(args, "singa_conf", None) is not None:
        readers = [singa_reader(args)]
    else:
        readers = [sources.open_reader(args, path) for path in args.path]
    deserializer = join_or_mix(args, readers)
    from recordkit.engine.chunk_partition import in_chunks
    if in_chunks(deserializer, args.partition_by, args.randomize, args.partitions):
        from recordkit.engine import ChunkPartition
        deserializer = ChunkPartition(deserializer, args.partitions, args.partition_index)
        args.partitions, args.partition_index = 1, 0
    window, sample_based = (args.window_samples, True) if args.window_samples else (args.window, False)
    sweeps = args.sweeps if args.sweeps is not None or args.max_samples is not None else 1
    return readers, MinibatchSource(deserializer, randomize=args.randomize, window=window,
                                    sample_based_window=sample_based, seed=args.seed, max_samples=args.max_samples,
                                    max_sweeps=sweeps, frame_mode=args.frame_mode,
                                    truncation_length=args.truncation_length, trace_level=args.trace_level,
                                    epoch_size=getattr(args, "epoch_size", None),
                                    max_memory=memory_bound(args), images=images)


def join_or_mix(args, readers):
    """The readers as one deserializer: mixed with --weights/--repeats, else joined (one: itself);
    ``read`` and ``plan`` both build it here, so they read the same thing."""
    from recordkit.engine.composite import CompositeDeserializer
    weights, repeats = getattr(args, "weights", None), getattr(args, "repeats", None)
    if weights is not None or repeats is not None:
        from recordkit.engine.mixture import Mixture
        return Mixture(readers, weights=weights, repeats=repeats, sweep_sequences=getattr(args, "sweep_sequences", None))
    return readers[0] if len(readers) == 1 else CompositeDeserializer(readers)


def singa_reader(args):
    """The input layer of ``--singa-conf`` as a deserializer; ``args.mb_size`` defaults to its batchsize."""
    from recordkit.compat.singa import load_job_conf
    layer = load_job_conf(args.singa_conf, root=args.singa_root,
                          storage_options=args.storage_options).layer(args.layer, args.phase)
    args.singa_layer = layer.name
    if args.mb_size is None:
        args.mb_size = layer.batchsize
    return layer.deserializer(precision=args.precision or "float", storage_options=args.storage_options)


def memory_size(text):
    """``--max-memory``: "auto", ``none`` (unbounded) or a size such as 512MB (argparse type)."""
    import argparse
    value = str(text).strip().lower()
    if value == "auto":
        return "auto"
    if value in ("none", "unbounded"):
        return None
    from recordkit.sizes import parse_size
    try:
        return parse_size(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def memory_bound(args):
    """``--max-memory`` as MinibatchSource takes it: "auto", None (``none``) or bytes; a bad size is a
    usage error (exit 2, one line)."""
    from recordkit.errors import UsageError
    try:
        return memory_size(getattr(args, "max_memory", "auto") or "auto")
    except Exception as e:  # argparse.ArgumentTypeError
        raise UsageError(f"--max-memory: {e}") from None


def run(args) -> int:
    import orjson
    if getattr(args, "images", None) is not None:
        return run_images(args)
    t0 = time.perf_counter()
    readers, source = build_source(args)
    t_open = time.perf_counter() - t0
    if getattr(args, "resume", None):
        resume(source, args)
    samples = sequences = minibatches = 0
    t1 = time.perf_counter()
    with source:
        for mb in minibatches_of(source, args):
            samples += mb.num_samples
            sequences += mb.num_sequences
            minibatches += 1
    seconds = time.perf_counter() - t1
    if getattr(args, "save_state", None):
        save_state(source, args.save_state)
    result = {"samples": samples, "sequences": sequences, "minibatches": minibatches,
              "memory": source.memory.as_dict(),
              "open_seconds": round(t_open, 4), "read_seconds": round(seconds, 4),
              "samples_per_second": round(samples / seconds, 1) if seconds > 0 else None}
    if getattr(args, "singa_layer", None) is not None:
        result["singa_layer"] = args.singa_layer
    if getattr(args, "report", False):
        result["shuffle_quality"] = shuffle_report(source)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
    else:
        print(f"{samples} samples, {sequences} sequences in {minibatches} minibatches of <= {args.mb_size} samples")
        print(f"open {t_open:.3f} s, read {seconds:.3f} s: {result['samples_per_second']:,.0f} samples/s")
        print(source.memory.describe())
        if "shuffle_quality" in result:
            print_shuffle_report(result["shuffle_quality"])
    for r in readers:
        report_tolerated(r)
        r.close()
    return 0


def minibatches_of(source, args):
    """The minibatches ``read`` takes from ``source``: ``--mb-size`` samples each, of this worker's
    partition, at most ``--stop-after`` of them."""
    stop_after = getattr(args, "stop_after", None)
    taken = 0
    while stop_after is None or taken < stop_after:
        mb = source.next_minibatch(args.mb_size, num_data_partitions=args.partitions,
                                   partition_index=args.partition_index)
        if mb is None:
            return
        taken += 1
        yield mb


def run_images(args) -> int:
    """``read --images FIELD``: the data set's encoded images through ``ImageStage`` in batches. Where
    FIELD is a bytes stream of the data set (declared with ``--stream``, or inferred), the images
    come through ``MinibatchSource(images=...)``: randomized with ``--randomize``, partitioned,
    resumable with ``--save-state``/``--resume`` like any read; else (WebDataset extensions such as
    ``jpg,png``, an OFRecord set that declares no streams) from the format's image hook in file order."""
    import orjson

    from recordkit.images import ImageStage, open_images
    t0 = time.perf_counter()
    stage = ImageStage(args.image_size, seed=args.seed)
    images = batches = 0
    shape = None
    stop_after = getattr(args, "stop_after", None)
    built = image_source(args, stage)
    if built is not None:
        readers, source, name = built
        if getattr(args, "resume", None):
            resume(source, args)
        with source:
            for mb in minibatches_of(source, args):
                images += mb.num_sequences
                batches += 1
                shape = list(mb[name].data.shape[1:])
        if getattr(args, "save_state", None):
            save_state(source, args.save_state)
        for r in readers:
            r.close()
    else:
        if getattr(args, "stream", None) or getattr(args, "resume", None) or getattr(args, "save_state", None):
            from recordkit.errors import UsageError
            raise UsageError(f"--images {args.images}: no bytes stream of that name to read through a minibatch "
                             f"source (--stream, --resume and --save-state need one: --stream NAME=bytes:FIELD)")
        pairs = open_images(args.path[0], args.images, **sources.storage(args))
        for batch in stage.batches(pairs, args.mb_size):
            images += batch.shape[0]
            batches += 1
            shape = list(batch.shape[1:])
            if stop_after is not None and batches >= stop_after:
                break
    seconds = time.perf_counter() - t0
    rate = round(images / seconds, 1) if seconds > 0 else None
    result = {"images": images, "batches": batches, "image_shape": shape, "seconds": round(seconds, 4),
              "images_per_second": rate}
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
    else:
        print(f"{images} images in {batches} batches of <= {args.mb_size}, each image {shape} float32")
        print(f"{seconds:.3f} s: {rate or 0:,.0f} images/s")
    return 0


def image_source(args, stage):
    """(readers, MinibatchSource with ``stage`` on the bytes stream FIELD, the stream's name) when the
    data set opens with such a stream (by name or field), else None (the format's image hook reads
    it: a data set whose streams cannot be told, WebDataset extensions such as ``jpg,png``)."""
    from recordkit.errors import FormatError, UsageError
    field = args.images
    if "," in field:
        return None
    try:
        reader = sources.open_reader(args, args.path[0])
    except (UsageError, FormatError):
        if getattr(args, "stream", None):
            raise
        return None
    spec = next((s for s in reader.streams if s.is_bytes and field in (s.name, s.alias)), None)
    if spec is None:
        reader.close()
        return None
    readers, source = build_source(args, [reader], images={spec.name: stage})
    return readers, source, spec.name


def resume(source, args) -> None:
    """``--resume``: one state file resumes exactly; several states (files, or a file holding a JSON
    list) are a job's partitions and resume elastically on this read's partition."""
    from recordkit.engine.elastic import order_states
    from recordkit.errors import NotRegularFileError, UsageError
    from recordkit.storage import location
    states = []
    for path in args.resume:
        try:
            with location.open_local(path) as f:
                data = json.load(f)
        except NotRegularFileError as e:  # refused before any open: a FIFO would block it
            raise UsageError(f"--resume: {e}") from None
        except OSError as e:
            raise UsageError(f"--resume: {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise UsageError(f"--resume: {path}: not JSON ({e})") from None
        states.extend(data if isinstance(data, list) else [data])
    chunked = getattr(source.deserializer, "num_partitions", None)  # --partition-by chunks
    m, j = (chunked, source.deserializer.index) if chunked else (args.partitions, args.partition_index)
    try:
        ordered = order_states(states)
        missing = [i for i, st in enumerate(ordered) if st is None]
        if len(ordered) == m:  # the same split: this partition's own state, exactly
            if ordered[j] is None:
                raise ValueError(f"no state of partition {j} of {m} among them")
            source.restore_from_checkpoint(ordered[j])
        elif missing:
            raise ValueError(f"an elastic resume needs the state of every partition of the job: "
                             f"{len(missing)} of {len(ordered)} missing (partitions {missing[:8]})")
        else:
            source.restore_from_checkpoint(ordered, num_data_partitions=args.partitions,
                                           partition_index=args.partition_index)
    except ValueError as e:
        raise UsageError(f"--resume: {e}") from None


def save_state(source, path) -> None:
    """``--save-state``: the checkpoint as JSON, written aside and renamed."""
    from recordkit.storage.atomic import AtomicFile
    with AtomicFile(path) as f:
        f.write(json.dumps(source.get_checkpoint_state()).encode() + b"\n")


def shuffle_report(source) -> dict:
    """``--report``: how sweep 0 of ``source`` mixes, for its window and the comparison windows
    (``engine.shuffle_quality.window_report``; orders only, nothing decoded)."""
    from recordkit.engine.shuffle_quality import window_report
    r = source.randomizer
    randomize = hasattr(r, "window")
    return window_report(source.chunks, seed=getattr(r, "seed", 0), chosen=getattr(r, "window", None),
                         chosen_sample_based=getattr(r, "sample_based", False), randomize=randomize,
                         order=r.sweep(0))


def print_shuffle_report(report: dict) -> None:
    from recordkit.engine.shuffle_quality import describe_window
    print(f"shuffle quality of sweep 0 (seed {report['seed']}), {report['sequences']} sequences in "
          f"{report['chunks']} chunks; a uniform shuffle: displacement ~0.333, correlation ~0, "
          f"same chunk ~{report['uniform_same_chunk']:.4f}")
    print(f"  {'window':>22} {'displacement':>13} {'correlation':>12} {'same chunk':>11}")
    for row in report["windows"]:
        mark = "  <- this read" if row["chosen"] else ""
        print(f"  {describe_window(row):>22} {row['displacement']:>13.4f} {row['correlation']:>12.4f} {row['same_chunk']:>11.4f}{mark}")
