"""safetensors_bytes(tensors): the bytes of a safetensors file holding `tensors` (name -> torch
tensor, in the order given), as the fixture generators write them: header padded with spaces to a
multiple of 8, metadata {"format": "pt"}. F32, BF16, I32 and I64 tensors."""
import json
import struct

import torch

DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int32: "I32", torch.int64: "I64"}


def safetensors_bytes(tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        # numpy has no bfloat16: its bytes are those of the same bits viewed as int16.
        raw = (t.contiguous().view(torch.int16) if t.dtype == torch.bfloat16 else t.contiguous()).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)
