"""SINGA 0.x job configurations (``job.conf``): their input layers as iterators and sources.

The implementation is in ``job``; this module keeps every name ``recordkit.compat.singa`` has offered.
"""
from recordkit.compat.singa.job import (  # noqa: F401
    ANY, DATA_PROTO, INPUT_TYPES, JOB_PROTO, LAYER_PROTO, MNIST_PROTO, NET_PROTO, PHASES, RGBIMAGE_PROTO, STORE_PROTO,
    STORES, BinFileStore, CreateStore, Field, InputLayer, JobConf, KVFileStore, Message, Mode, Open, Store,
    TextFileStore, Where, load_job_conf, open, parse_job_conf, parse_text, store_class)

__all__ = ["parse_job_conf", "load_job_conf", "JobConf", "InputLayer", "INPUT_TYPES", "PHASES",
           "Mode", "Store", "Open", "open", "CreateStore", "store_class", "STORES",
           "KVFileStore", "BinFileStore", "TextFileStore"]
