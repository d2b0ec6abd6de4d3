"""SINGA 0.x job configurations (``job.conf``): their input layers as iterators and sources.

A SINGA 0.1-0.3 job describes where its data comes from inside the job's ``JobProto``,
written in protobuf text format::

    neuralnet {
      layer { name: "data" type: kRecordInput
              store_conf { backend: "kvfile" path: "examples/cifar10/train_data.bin"
                           mean_file: "examples/cifar10/image_mean.bin" batchsize: 64
                           random_skip: 5000 shape: 3 shape: 32 shape: 32 }
              include: kTrain }
      ...
    }

``load_job_conf(path)`` / ``parse_job_conf(text)`` read such a text and give a ``JobConf`` whose
``input_layers`` are its ``kRecordInput`` and ``kCSVInput`` layers (0.2-0.3; their development names
``kProtoRecord``/``kCSVRecord`` too) and 0.1's ``kShardData`` layers (``sharddata_conf``, with the
``kRGBImage``/``kMnist`` parser layer that normalised their output; the 0.1 job forms
``cluster { } model { ... }``, string layer types, ``*_param`` message names and prefetch
``sublayers`` are read as well), each with its phases. ``kLMDBData`` layers are listed but refused
when read (recordkit has no LMDB store). Each ``InputLayer`` gives

* ``batches()``: SINGA's own iteration (``formats.singa.layers.RecordInputLayer`` /
  ``CSVInputLayer``: endless, ``random_skip`` once, wrap mid-batch, ``(x - mean) / std``);
* ``deserializer()`` / ``minibatch_source()``: the layer's store as a recordkit Deserializer
  (streams ``features`` and ``label``, normalised exactly as the layer does, in float32) under
  the engine's ``MinibatchSource`` (randomization, partitions, checkpoints).

Why a parser of our own rather than ``google.protobuf.text_format``: SINGA's ``job.proto`` has
many messages recordkit has no use for (updaters, convolution settings, cluster topology) and
users extended it (``extensions 101 to 200``); a descriptor of all of it would be large and
still reject real files. So the tokenizer/parser here reads the whole protobuf text syntax,
checks the messages that decide the data strictly (``JobProto``/``NetProto``/``LayerProto``
field names, ``StoreProto``, ``DataProto``, ``RGBImageProto``, ``MnistProto``, phases) and
accepts the contents of the other known messages as they are. Every problem is a
``FormatError`` at the ``file:line:column`` (1-based, columns in bytes) of the offending token,
as ``compat.brainscript`` reports.

It has four layers, one module each but the model's two: ``tokens`` (protobuf text tokens with
their ``Where``), ``tree`` (the parser: ``Message``/``Field`` trees, ``parse_text``), ``schema`` (the
messages checked strictly and those accepted as written), and the model: ``input_layer``
(``InputLayer``) and ``job`` (``JobConf``, ``parse_job_conf``, ``load_job_conf``).

Relative store paths are resolved against ``root`` (default: the current directory), because
SINGA resolved them against the directory it was started from (``SINGA_HOME``).

SINGA's Store API (``Open``, ``CreateStore``, ``Mode``, the store classes) is re-exported here,
so ``from recordkit.compat.singa import Open, Mode`` works like ``singa::io``.
"""
from recordkit.formats.singa import (STORES, BinFileStore, CreateStore, KVFileStore, Mode, Open, Store,  # noqa: F401
                                     TextFileStore, open, store_class)
from recordkit.compat.singa.tokens import Where  # noqa: F401
from recordkit.compat.singa.tree import Field, Message, parse_text  # noqa: F401
from recordkit.compat.singa.schema import (ANY, DATA_PROTO, JOB_PROTO, LAYER_PROTO, MNIST_PROTO,  # noqa: F401
                                          NET_PROTO, PHASES, RGBIMAGE_PROTO, STORE_PROTO)
from recordkit.compat.singa.input_layer import InputLayer  # noqa: F401
from recordkit.compat.singa.job import INPUT_TYPES, JobConf, load_job_conf, parse_job_conf  # noqa: F401

__all__ = ["parse_job_conf", "load_job_conf", "JobConf", "InputLayer", "INPUT_TYPES", "PHASES",
           "Mode", "Store", "Open", "open", "CreateStore", "store_class", "STORES",
           "KVFileStore", "BinFileStore", "TextFileStore"]
