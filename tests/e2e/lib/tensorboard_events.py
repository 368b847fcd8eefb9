#!/usr/bin/env python3
"""Reads the TensorBoard event files of a directory and prints their scalars as JSON:
{"reader": ..., "files": [names], "file_versions": [...], "scalars": [{"tag", "step", "value", "wall_time"}]}.

--reader tensorboard uses the tensorboard package's own reader (EventFileLoader); --reader own a
TFRecord and protocol-buffer decoder written here that also checks every record's CRCs, for
machines without the package (it is not a Debian package); --reader auto (the default) takes the
package when it can be imported.

A file may end in a record cut short (a run killed while its write was under way: the kernel
stops a write at a page boundary when the process is killed). TensorBoard's loader reads up to
the last whole record and stops there; the decoder here does the same and names such files under
"truncated", so that a caller can refuse them where a run finished. A bad CRC is always an error.
Usage: tensorboard_events.py [--reader auto|tensorboard|own] DIR
"""
import json
import os
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


TRUNCATED = []  # the files that end in a record cut short


def tfrecords(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            TRUNCATED.append(os.path.basename(path))
            return
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked_crc32c(header):
            raise ValueError(f"{path}: bad length CRC at byte {at}")
        body = data[at + 12:at + 12 + length]
        if len(body) != length or len(data) < at + 16 + length:
            TRUNCATED.append(os.path.basename(path))
            return
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if body_crc != masked_crc32c(body):
            raise ValueError(f"{path}: bad data CRC at byte {at}")
        yield body
        at += 16 + length


def varint(buf, at):
    value = shift = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def fields(buf):
    """(number, wire type, value) of each field; fixed fields as raw bytes."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        elif wire == 2:
            size, at = varint(buf, at)
            value, at = buf[at:at + size], at + size
        else:
            raise ValueError(f"unexpected wire type {wire}")
        yield number, wire, value


def own_events(path):
    """Event protos (tensorboard/compat/proto/event.proto) as dicts."""
    for record in tfrecords(path):
        event = {"wall_time": 0.0, "step": 0, "file_version": None, "values": []}
        for number, wire, value in fields(record):
            if number == 1 and wire == 1:
                event["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2 and wire == 0:
                event["step"] = value - (1 << 64) if value >= 1 << 63 else value
            elif number == 3 and wire == 2:
                event["file_version"] = value.decode()
            elif number == 5 and wire == 2:
                for n, w, v in fields(value):  # Summary.value
                    if n != 1 or w != 2:
                        continue
                    tag, simple = None, None
                    for vn, vw, vv in fields(v):  # Summary.Value
                        if vn == 1 and vw == 2:
                            tag = vv.decode()
                        elif vn == 2 and vw == 5:
                            simple = struct.unpack("<f", vv)[0]
                    event["values"].append((tag, simple))
        yield event


def tensorboard_events(path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    for e in EventFileLoader(path).Load():
        values = []
        for v in e.summary.value:
            # The loader migrates simple_value scalars to tensors on the way (data_compat).
            kind = v.WhichOneof("value")
            value = v.simple_value if kind == "simple_value" else float(tensor_util.make_ndarray(v.tensor))
            values.append((v.tag, value))
        yield {"wall_time": e.wall_time, "step": e.step,
               "file_version": e.file_version if e.HasField("file_version") else None, "values": values}


def main(argv):
    reader = "auto"
    if len(argv) == 3 and argv[0] == "--reader":
        reader, argv = argv[1], argv[2:]
    if len(argv) != 1 or reader not in ("auto", "tensorboard", "own"):
        sys.exit(__doc__)
    if reader == "auto":
        try:
            import tensorboard.backend.event_processing.event_file_loader  # noqa: F401
            reader = "tensorboard"
        except ImportError:
            reader = "own"
    read = tensorboard_events if reader == "tensorboard" else own_events
    directory = argv[0]
    names = sorted(n for n in os.listdir(directory) if "tfevents" in n)
    out = {"reader": reader, "files": names, "file_versions": [], "scalars": []}
    for name in names:
        for e in read(os.path.join(directory, name)):
            if e["file_version"]:
                out["file_versions"].append(e["file_version"])
            for tag, value in e["values"]:
                out["scalars"].append({"tag": tag, "step": e["step"], "value": value, "wall_time": e["wall_time"]})
    out["truncated"] = TRUNCATED
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
