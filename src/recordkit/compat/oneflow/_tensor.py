"""What OneFlow's data ops return, as far as data scripts touch it: dtypes, ``Size``, tensors.

Results are :class:`Tensor` objects, thin wrappers around a NumPy array, not torch tensors:
OneFlow scripts compare dtypes by identity (``x.dtype is flow.uint8``, which
``CropMirrorNormalize`` itself relies on), print ``oneflow.Size([...])`` shapes and hand
"tensor buffers" (one variable-shape array per sample) from decoder to decoder; a wrapper
keeps all of that without requiring torch, and ``.numpy()`` (or ``np.asarray``) is the array
itself, with no copy, so handing data to torch is ``torch.from_numpy(t.numpy())``.

A dense :class:`Tensor` holds an ndarray; a :class:`TensorBuffer` (``dtype is
flow.tensor_buffer``, shape ``(N,)``) holds N arrays and its ``.numpy()`` is the list of them,
as in OneFlow; an :class:`OFRecordBatch` (``dtype is flow.of_record``) is what the reader
returns: decoders accept it, ``.numpy()`` refuses like OneFlow's (``records()`` gives the
decoded records in recordkit's own form).
"""
from __future__ import annotations

import warnings

import numpy as np

from recordkit.errors import RecordkitWarning


class dtype:
    """A OneFlow dtype: one object per type, compared by identity (``oneflow.float32``)."""

    __slots__ = ("name", "np")

    def __init__(self, name: str, np_dtype):
        self.name = name
        self.np = None if np_dtype is None else np.dtype(np_dtype)

    def __repr__(self) -> str:
        return f"oneflow.{self.name}"

    __str__ = __repr__

    @property
    def is_floating_point(self) -> bool:
        return self.np is not None and self.np.kind == "f"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
float16 = dtype("float16", np.float16)
int8 = dtype("int8", np.int8)
uint8 = dtype("uint8", np.uint8)
int32 = dtype("int32", np.int32)
int64 = dtype("int64", np.int64)
bool_ = dtype("bool", np.bool_)
char = dtype("char", np.int8)
tensor_buffer = dtype("tensor_buffer", None)
of_record = dtype("of_record", None)

_DTYPES = {d.name: d for d in (float32, float64, float16, int8, uint8, int32, int64, bool_, char, tensor_buffer,
                               of_record)}
_BY_NUMPY = {d.np: d for d in (float32, float64, float16, int8, uint8, int32, int64, bool_)}


def _dtype_by_name(name: str) -> dtype:
    return _DTYPES[name]


def as_dtype(value, what: str = "dtype") -> dtype:
    """A OneFlow dtype for ``value`` (a dtype, a NumPy dtype or type, or a name like "float32")."""
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and value in _DTYPES:
        return _DTYPES[value]
    try:
        return _BY_NUMPY[np.dtype(value)]
    except (TypeError, KeyError):
        raise ValueError(f"{what} must be a oneflow dtype such as flow.float32, not {value!r}") from None


def from_numpy_dtype(np_dtype) -> dtype:
    return _BY_NUMPY.get(np.dtype(np_dtype)) or dtype(np.dtype(np_dtype).name, np_dtype)


class Size(tuple):
    """``oneflow.Size``: a tuple of ints that prints as OneFlow's."""

    def __repr__(self) -> str:
        return f"oneflow.Size([{', '.join(str(int(s)) for s in self)}])"

    __str__ = __repr__

    def numel(self) -> int:
        return int(np.prod(self, dtype=np.int64))


class device:
    """``oneflow.device``: only the CPU holds data here (see :meth:`Tensor.to`)."""

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        kind, _, idx = str(type).partition(":")
        self.type = kind
        self.index = int(idx) if idx else (0 if index is None else int(index))

    def __repr__(self) -> str:
        return f'device(type="{self.type}", index={self.index})'

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


_CPU = device("cpu")
_warned_device = False


def _warn_device(target) -> None:
    global _warned_device
    if not _warned_device:
        _warned_device = True
        warnings.warn(f"recordkit.compat.oneflow: .to({target!r}) keeps the data in host memory (recordkit tensors "
                      "are NumPy arrays); move them with your framework, e.g. torch.from_numpy(t.numpy()).to(...)",
                      RecordkitWarning, stacklevel=3)


class Tensor:
    """A dense tensor: a NumPy array with OneFlow's ``shape``/``dtype``/``numpy()`` surface."""

    __array_priority__ = 10

    def __init__(self, array):
        self._array = np.asarray(array)

    # -- what scripts read ------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._array.shape)

    @property
    def dtype(self) -> dtype:
        return from_numpy_dtype(self._array.dtype)

    @property
    def device(self) -> device:
        return _CPU

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_global(self) -> bool:
        return False

    is_consistent = is_global

    @property
    def is_local(self) -> bool:
        return True

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def numpy(self) -> np.ndarray:
        """The array itself (no copy), as OneFlow's CPU tensors share memory with ``numpy()``."""
        return self._array

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else int(self._array.shape[dim])

    def dim(self) -> int:
        return self._array.ndim

    def numel(self) -> int:
        return int(self._array.size)

    nelement = numel

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, index):
        if isinstance(index, Tensor):
            index = index.numpy()
        return Tensor(self._array[index])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def tolist(self):
        return self._array.tolist()

    def item(self):
        return self._array.item()

    def __int__(self):
        return int(self._array.item())

    def __float__(self):
        return float(self._array.item())

    def __bool__(self):
        return bool(self._array)

    def __repr__(self) -> str:
        body = np.array2string(self._array, separator=", ", prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype})"

    # -- conversions scripts make -----------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(dtype)`` converts; ``to("cuda")``/``to(device)`` keeps the data on the host (a warning)."""
        target = kwargs.get("dtype") or kwargs.get("device")
        for a in args:
            target = a
        if isinstance(target, dtype) or (target is not None and not isinstance(target, (str, device))):
            return Tensor(self._array.astype(as_dtype(target).np))
        if target is not None and device(target) != _CPU:
            _warn_device(str(target))
        return self

    def cpu(self):
        return self

    def cuda(self, *args, **kwargs):
        _warn_device("cuda")
        return self

    def detach(self):
        return self

    def clone(self):
        return Tensor(self._array.copy())

    def float(self):
        return Tensor(self._array.astype(np.float32))

    def double(self):
        return Tensor(self._array.astype(np.float64))

    def int(self):
        return Tensor(self._array.astype(np.int32))

    def long(self):
        return Tensor(self._array.astype(np.int64))

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Tensor(self._array.reshape(shape))

    view = reshape

    def squeeze(self, dim=None):
        return Tensor(self._array.squeeze() if dim is None else self._array.squeeze(dim))

    def unsqueeze(self, dim: int):
        return Tensor(np.expand_dims(self._array, dim))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        shape = self._array.shape
        end = end_dim % len(shape) if shape else 0
        return Tensor(self._array.reshape(shape[:start_dim] + (-1,) + shape[end + 1:]))

    def permute(self, *dims):
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return Tensor(self._array.transpose(dims))

    # -- arithmetic (NumPy semantics; enough for the usual "/ 255." or label tweaks) ---------------
    def _binary(self, other, op):
        return Tensor(op(self._array, other.numpy() if isinstance(other, Tensor) else other))

    def __add__(self, other): return self._binary(other, np.add)
    def __radd__(self, other): return self._binary(other, lambda a, b: np.add(b, a))
    def __sub__(self, other): return self._binary(other, np.subtract)
    def __rsub__(self, other): return self._binary(other, lambda a, b: np.subtract(b, a))
    def __mul__(self, other): return self._binary(other, np.multiply)
    def __rmul__(self, other): return self._binary(other, lambda a, b: np.multiply(b, a))
    def __truediv__(self, other): return self._binary(other, np.true_divide)
    def __rtruediv__(self, other): return self._binary(other, lambda a, b: np.true_divide(b, a))
    def __eq__(self, other): return self._binary(other, np.equal)
    def __ne__(self, other): return self._binary(other, np.not_equal)
    def __lt__(self, other): return self._binary(other, np.less)
    def __le__(self, other): return self._binary(other, np.less_equal)
    def __gt__(self, other): return self._binary(other, np.greater)
    def __ge__(self, other): return self._binary(other, np.greater_equal)
    def __neg__(self): return Tensor(-self._array)
    __hash__ = object.__hash__


class TensorBuffer(Tensor):
    """OneFlow's tensor of ``tensor_buffer``: N arrays of their own shapes; ``numpy()`` is the list."""

    def __init__(self, arrays):
        self._items = [np.asarray(a) for a in arrays]
        self._array = None

    @property
    def shape(self) -> Size:
        return Size((len(self._items),))

    @property
    def dtype(self) -> dtype:
        return tensor_buffer

    @property
    def ndim(self) -> int:
        return 1

    def numpy(self) -> list:
        return self._items

    def __array__(self, dtype=None, copy=None):
        raise TypeError("a tensor buffer holds arrays of different shapes; use .numpy() for the list of them "
                        "(or flow.tensor_buffer_to_tensor / flow.nn.image.batch_align)")

    def numel(self) -> int:
        return len(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return TensorBuffer(self._items[index])
        return Tensor(self._items[index])

    def tolist(self):
        return [a.tolist() for a in self._items]

    def item(self):
        raise TypeError("item() of a tensor buffer")

    def __repr__(self) -> str:
        return f"tensor(<{len(self._items)} buffers>, dtype=oneflow.tensor_buffer)"

    def to(self, *args, **kwargs):
        target = kwargs.get("device") or (args[0] if args else None)
        if isinstance(target, (str, device)) and device(target) != _CPU:
            _warn_device(str(target))
            return self
        raise TypeError("a tensor buffer cannot be converted to another dtype")

    def clone(self):
        return TensorBuffer([a.copy() for a in self._items])

    def _binary(self, other, op):
        raise TypeError("arithmetic on a tensor buffer (decode into a dense tensor first)")


class OFRecordBatch(Tensor):
    """A batch of records as ``OFRecordReader`` returns it (``dtype is flow.of_record``, shape ``(N,)``).

    Holds the undecoded frames ``[(payload, (path, record index, byte offset))]``, or the runs of
    frames in the blocks read (``recordkit.formats.ofrecord.blocks.Run``, the reader without a
    shuffle): the raw decoder reads them there with the compiled wire decoder; the other decoders
    parse the records once, on first use.
    """

    def __init__(self, frames=None, budget=None, *, runs=None, following=None):
        self._frames = None if frames is None else list(frames)
        self._runs = runs
        self._records = None
        self._budget = budget
        self._array = None
        self._following = following

    def following(self):
        """The batch its reader will return next, read now (None if unknown or if reading it failed:
        the reader's next call raises that): what an image decoder prepares while this one is used."""
        return None if self._following is None else self._following()

    @property
    def runs(self):
        """The batch as runs of frames in their read blocks, or None (frames only)."""
        return self._runs

    @property
    def shape(self) -> Size:
        return Size((len(self),))

    @property
    def dtype(self) -> dtype:
        return of_record

    @property
    def ndim(self) -> int:
        return 1

    def numpy(self):
        raise RuntimeError("Invalid datatype kOFRecord: a batch of OFRecords has no array form; decode it with "
                           "flow.nn.OFRecordRawDecoder / OFRecordBytesDecoder / OFRecordImageDecoder "
                           "(or .records() for recordkit's {name: Feature} dicts)")

    def __array__(self, dtype=None, copy=None):
        return self.numpy()

    def numel(self) -> int:
        return len(self)

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs) if self._frames is None else len(self._frames)

    def __getitem__(self, index):
        frames = self.frames()[index] if isinstance(index, slice) else [self.frames()[index]]
        return OFRecordBatch(frames, self._budget)

    def frames(self) -> list:
        if self._frames is None:
            from recordkit.formats.ofrecord.blocks import frames_of
            self._frames = frames_of(self._runs)
        return self._frames

    def where(self) -> list:
        """``(part path, record index)`` of each record, for located errors."""
        return [(path, index) for _, (path, index, _) in self.frames()]

    def records(self) -> list:
        """The records as ``{name: Feature}`` dicts (recordkit.formats.ofrecord.codec), parsed once."""
        if self._records is None:
            from recordkit.formats.ofrecord import codec
            self._records = [codec.decode(payload, path=path, offset=off, index=i)
                             for payload, (path, i, off) in self.frames()]
        return self._records

    def tolist(self):
        return self.records()

    def item(self):
        raise TypeError("item() of a batch of records")

    def __repr__(self) -> str:
        return f"tensor(<{len(self._frames)} OFRecords>, dtype=oneflow.of_record)"

    def to(self, *args, **kwargs):
        return self

    def clone(self):
        return OFRecordBatch(self._frames, self._budget, runs=self._runs)

    def _binary(self, other, op):
        raise TypeError("arithmetic on a batch of records (decode it first)")


def tensor(data, dtype=None, device=None, requires_grad=False):
    """``flow.tensor(data, dtype=None)``: a dense tensor (a copy), e.g. flip codes for ``flow.nn.image.flip``."""
    arr = np.array(data.numpy() if isinstance(data, Tensor) else data)
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype).np)
    elif arr.dtype == np.float64 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)  # OneFlow: Python floats become float32
    return Tensor(arr)


def as_array(value, what: str) -> np.ndarray:
    """A dense input (Tensor, ndarray, list) as an ndarray."""
    if isinstance(value, (TensorBuffer, OFRecordBatch)):
        raise TypeError(f"{what} needs a dense tensor, got a {value.dtype} tensor")
    if isinstance(value, Tensor):
        return value.numpy()
    return np.asarray(value)


def as_images(value, what: str):
    """Images as OneFlow's ops take them: a tensor buffer (list of HWC arrays) or a dense NHWC tensor."""
    if isinstance(value, TensorBuffer):
        return value.numpy()
    if isinstance(value, OFRecordBatch):
        raise TypeError(f"{what} needs images, got a batch of OFRecords (decode them first)")
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value
    return [np.asarray(v.numpy() if isinstance(v, Tensor) else v) for v in value]


def tensor_buffer_to_list_of_tensors(tensor, out_shapes, out_dtypes):
    """``flow.tensor_buffer_to_list_of_tensors``: the i-th buffer as a dense tensor of ``out_shapes[i]``.

    OneFlow returns one tensor per buffer with a leading dimension of 1 removed only when the shape
    says so; here each buffer's values are reshaped to ``out_shapes[i]`` and cast to ``out_dtypes[i]``
    (a buffer must hold exactly that many values).
    """
    items = tensor.numpy() if isinstance(tensor, TensorBuffer) else list(tensor)
    if len(out_shapes) != len(items) or len(out_dtypes) != len(items):
        raise ValueError(f"{len(items)} buffers, {len(out_shapes)} shapes and {len(out_dtypes)} dtypes")
    out = []
    for i, (a, shape, dt) in enumerate(zip(items, out_shapes, out_dtypes)):
        a = np.asarray(a)
        shape = tuple(int(s) for s in shape)
        if a.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"buffer {i} holds {a.size} values, shape {shape} needs {int(np.prod(shape))}")
        out.append(Tensor(a.reshape(shape).astype(as_dtype(dt).np, copy=False)))
    return out


def tensor_buffer_to_tensor(input, dtype, instance_shape):
    """``flow.tensor_buffer_to_tensor``: buffers of equal size stacked into ``(N, *instance_shape)``."""
    items = input.numpy() if isinstance(input, TensorBuffer) else list(input)
    shape = tuple(int(s) for s in instance_shape)
    k = int(np.prod(shape, dtype=np.int64))
    out = np.empty((len(items),) + shape, dtype=as_dtype(dtype).np)
    for i, a in enumerate(items):
        a = np.asarray(a)
        if a.size != k:
            raise ValueError(f"buffer {i} holds {a.size} values, instance_shape {shape} needs {k}")
        out[i] = a.reshape(shape)
    return Tensor(out)


def tensor_to_tensor_buffer(x, instance_dims: int):
    """``flow.tensor_to_tensor_buffer``: the last ``instance_dims`` axes of each item become one buffer."""
    arr = as_array(x, "tensor_to_tensor_buffer")
    lead = arr.ndim - int(instance_dims)
    if lead < 1:
        raise ValueError(f"instance_dims {instance_dims} leaves no batch axis in shape {arr.shape}")
    return TensorBuffer(list(arr.reshape((-1,) + arr.shape[lead:])))
