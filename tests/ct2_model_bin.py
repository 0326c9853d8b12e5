"""Reads a CTranslate2 model.bin (the format ctranslate2.specs.ModelSpec writes) into numpy arrays by name.

Tests read an export's stored weights with it, to check them against numpy's reference of what the export
should hold (e.g. per-row int8 quantization), whatever CPU the test runs on.
"""
import struct

import numpy as np

DTYPES = (np.float32, np.int8, np.int16, np.int32, np.float16)  # CTranslate2's DataType order (bfloat16 unread)


def read_variables(path: str) -> dict[str, np.ndarray]:
    """The variables of a model.bin by name; aliases resolve to the variable they name."""
    with open(path, "rb") as f:
        data = f.read()
    offset = 0

    def take(fmt: str):
        nonlocal offset
        values = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string() -> str:
        nonlocal offset
        length = take("H")
        text = data[offset:offset + length - 1].decode("utf-8")  # the length counts a trailing NUL
        offset += length
        return text

    take("I"), string(), take("I")  # binary version, spec name, spec revision
    variables = {}
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        dtype, size = DTYPES[take("B")], take("I")
        variables[name] = np.frombuffer(data, dtype, size // np.dtype(dtype).itemsize, offset).reshape(shape)
        offset += size
    for _ in range(take("I")):
        alias = string()
        variables[alias] = variables[string()]
    return variables
