"""How an upload's bytes are kept in the ``uploads`` table: hashed, sized, compressed once.

A gzip upload is stored as sent (compressing it again saves nothing); anything else is stored
as a Zstandard frame at level 1 (pyarrow's codec, already loaded with the dataset): half the
bytes of zlib at level 1, the codec of rows stored before, in a quarter of its CPU
(docs/server.md, "Where uploads live"). Rows of either codec read back; the bytes handed back
are always the bytes that were uploaded.
"""

from __future__ import annotations

import hashlib
import zlib
from enum import StrEnum
from functools import cache
from typing import Any

import pyarrow as pa

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_LEVEL = 1


class Codec(StrEnum):
    STORED = "stored"  # the bytes as uploaded (already gzip)
    ZLIB = "zlib"  # level 1: what the server wrote before Zstandard; still read
    ZSTD = "zstd"


@cache
def _zstd() -> pa.Codec:
    return pa.Codec("zstd", compression_level=ZSTD_LEVEL)


def pack(raw: bytes) -> dict[str, Any]:
    """The ``uploads`` columns for ``raw``: its SHA-256 and size, and the stored bytes."""
    if raw[:2] == GZIP_MAGIC:
        codec, data = Codec.STORED, raw
    else:
        codec, data = Codec.ZSTD, _zstd().compress(raw, asbytes=True)
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "codec": str(codec),
        "data": data,
    }


def unpack(codec: str, data: bytes, size: int) -> bytes:
    """The uploaded bytes back from a stored row (``size``: the row's size of them)."""
    match Codec(codec):
        case Codec.ZSTD:
            return _zstd().decompress(bytes(data), decompressed_size=size, asbytes=True)
        case Codec.ZLIB:
            return zlib.decompress(data)
        case Codec.STORED:
            return bytes(data)
