"""The compression codecs of Kafka's record batches v2 (attributes bits 0-2), for every reader and writer.

gzip through the standard library; snappy (raw and the Java client's xerial framing),
lz4 (frame format) and zstd through ``cramjam``, imported on the first compressed batch.
:func:`decompress` never inflates past ``limit`` bytes (a decompression bomb is a
``CorruptRecordError``, as is any data that does not decompress); :func:`compress` is
what a writer applies (the producers, and the log when a topic's ``compression.type``
differs from a batch's codec, as Kafka's ``LogValidator``). Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
import zlib

from kafkasim.errors import CorruptRecordError, InvalidRecordError

__all__ = ["decompress", "compress", "codec_id", "CODEC_NAMES", "COMPRESSION_NONE", "COMPRESSION_GZIP",
           "COMPRESSION_SNAPPY", "COMPRESSION_LZ4", "COMPRESSION_ZSTD"]

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
"""Kafka's names of the codecs (``compression.type``, ``kafka-dump-log``'s ``compresscodec``)."""
_CODEC_NAMES = CODEC_NAMES
_CODEC_IDS = {v: k for k, v in CODEC_NAMES.items()}


def codec_id(name: str) -> int:
    """The attributes codec of a ``compression.type`` name (``none``, ``gzip``, ``snappy``,
    ``lz4``, ``zstd``); InvalidRecordError naming anything else."""
    try:
        return _CODEC_IDS[name]
    except (KeyError, TypeError):
        raise InvalidRecordError(
            f"unknown compression type {name!r} (one of {', '.join(_CODEC_IDS)})") from None
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: int, data: bytes, limit: int, where: str) -> bytes:
    try:
        if codec == COMPRESSION_GZIP:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = bytearray()
            while data:
                out += d.decompress(data, limit + 1 - len(out))
                if len(out) > limit:
                    break
                if d.unconsumed_tail:
                    data = d.unconsumed_tail
                    continue
                if not d.eof:
                    raise CorruptRecordError(f"{where}: truncated gzip data")
                data = d.unused_data  # a second gzip member
                if data:
                    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            result = bytes(out)
        else:
            import cramjam  # imported on first compressed batch only

            if codec == COMPRESSION_SNAPPY:
                result = _snappy_decompress(cramjam, data, limit, where)
            elif codec == COMPRESSION_LZ4:
                result = bytes(cramjam.lz4.decompress(data))
            elif codec == COMPRESSION_ZSTD:
                result = bytes(cramjam.zstd.decompress(data))
            else:
                raise CorruptRecordError(f"{where}: unknown compression codec {codec}")
    except CorruptRecordError:
        raise
    except Exception as exc:  # zlib.error, cramjam.DecompressionError, ValueError ...
        raise CorruptRecordError(
            f"{where}: {_CODEC_NAMES.get(codec, codec)} data does not decompress: {exc}") from exc
    if len(result) > limit:
        raise CorruptRecordError(
            f"{where}: {_CODEC_NAMES[codec]} data inflates past the limit of {limit} bytes")
    return result


def _snappy_decompress(cramjam, data: bytes, limit: int, where: str) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    # xerial framing (the Java client's SnappyOutputStream): 8-byte magic, two int32
    # versions, then blocks of [int32 compressed length][raw snappy block]
    pos, out = 16, bytearray()
    if len(data) < pos:
        raise CorruptRecordError(f"{where}: truncated xerial snappy header")
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError(f"{where}: truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError(f"{where}: xerial snappy block of {n} bytes past the end")
        out += cramjam.snappy.decompress_raw(data[pos:pos + n])
        pos += n
        if len(out) > limit:
            break
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    import cramjam

    if codec == COMPRESSION_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == COMPRESSION_LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidRecordError(f"unknown compression codec {codec}")
