"""onnxruntime sessions, opened one way everywhere (the encoder, the derived-weights check of a
model folder, the e5 teacher); torch-free, and importing nothing of the package but its error and
its thread policy (threads.chosen: a session given no count takes the command's --threads)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from edge_xsent.errors import UserError
from edge_xsent.threads import chosen, waits_passively


def onnx_session(file: Path, threads: int | None, session_options=None, disabled_optimizers: Sequence[str] = (),
                 data: bytes | None = None):
    """An onnxruntime session on `file` (from `data`, its bytes, when the caller has read them); a
    graph it cannot load (truncated, external data it refuses) is a UserError naming the file, not
    onnxruntime's own exception."""
    import onnxruntime as ort

    opts = session_options or ort.SessionOptions()
    if data is not None:  # a graph's external data is read beside `file`, inside its folder, never from the
        # working directory (onnxruntime's default for a graph given as bytes); the folder's manifest lists it
        opts.add_session_config_entry("session.model_external_initializers_file_folder_path", str(Path(file).parent))
    if threads := chosen(threads):
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    if waits_passively():  # its pool spins by default, holding its cores between batches beside other work
        for pool in ("intra_op", "inter_op"):
            opts.add_session_config_entry(f"session.{pool}.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(file) if data is None else data, opts, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=list(disabled_optimizers))
    except Exception as e:  # onnxruntime's own types: InvalidProtobuf, Fail, ...  # noqa: BLE001
        raise UserError(f"{file}: onnxruntime cannot load this graph ({str(e).splitlines()[0][:200]}); re-export "
                        "or re-download the model") from None
