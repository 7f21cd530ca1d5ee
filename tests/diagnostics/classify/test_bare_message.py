"""A start under way whose paste ends in a message one of vLLM's raise sites builds,
printed bare: the message alone, without its exception's class, the traceback or a log
level (a user's paste of the line that mattered, its opening perhaps cut and marked with
"..."). No rule reads it; the catalogue does, and the start failed with it
(diagnostics.classify.unmatched.with_bare_message). Built combinations, read through
both paths (the file path counts the message's line from the end of the file)."""

from __future__ import annotations

import io

import pytest

from diagnostics.attempts.lines import classify_lines
from diagnostics.model import Category, State
from diagnostics.scanning.scan import classify_stream
from tests.support.packs import both_paths, shipped_pack

COMMAND = "$ vllm serve neuralmagic/Llama-3.1-8B-Instruct-quantized.w4a16 --quantization gptq"
QUANT = (
    "Quantization method specified in the model config (compressed-tensors) does not match "
    "the quantization method specified in the `quantization` argument (gptq)."
)
MAX_LEN = (
    "User-specified max_model_len (65536) is greater than the derived max_model_len "
    "(max_position_embeddings=32768 or model_max_length=None in model's config.json). This "
    "may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, "
    "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
)
MESSAGES = {"quantization": QUANT, "max-len": MAX_LEN}
VERSION = "INFO 03-01 10:00:01 [__init__.py:239] Automatically detected platform cuda."
LOADING = "INFO 03-01 10:00:09 [gpu_model_runner.py:1329] Starting to load model /m..."


@pytest.mark.parametrize("name", MESSAGES)
@pytest.mark.parametrize(
    "shape",
    [
        lambda m: [COMMAND, m],
        lambda m: [COMMAND, "..." + m[30:]],
        lambda m: [COMMAND, "… " + m[12:]],
        lambda m: [VERSION, "", m, ""],
        lambda m: [COMMAND, m[:90]],
        lambda m: [m],
    ],
    ids=["whole", "elided-start", "ellipsis-start", "after-a-version-line", "cut-end", "alone"],
)
def test_a_raised_message_pasted_alone_ends_the_start(name, shape):
    verdict = both_paths(shape(MESSAGES[name]))
    assert (verdict.category, verdict.state) == (Category.BAD_CONFIG, State.FAILED_PERMANENT)
    if verdict.rule != "max-model-len-above-model-limit":  # the rule reads it whole
        assert verdict.rule == "catalogued-bad-config"
        assert "the log shows its message alone" in (verdict.cause or "")


def test_the_line_number_is_the_messages_also_far_into_a_big_file():
    """The file path reads only the file's last 64 KiB: the line is counted from the top."""
    filler = [f"{VERSION} {n}" for n in range(3000)]
    lines = [*filler, COMMAND, "", QUANT, ""]
    verdict = both_paths(lines)
    assert verdict.evidence is not None and verdict.evidence.line == len(filler) + 3
    # without a final line end, and read from a pipe (spooled to a file first)
    data = "\n".join(lines[:-1]).encode()
    piped = classify_stream(_Pipe(data), shipped_pack())
    assert piped == classify_lines(lines[:-1], shipped_pack())


@pytest.mark.parametrize(
    "lines",
    [
        [COMMAND, f"WARNING 03-01 10:00:02 [config.py:1] {QUANT}"],  # logged, not raised
        [COMMAND, f"INFO 03-01 10:00:02 [config.py:1] {QUANT}"],
        [COMMAND, QUANT, LOADING],  # the start went on after it
        [COMMAND, "Quantization method specified in"],  # too little (MIN_CUT)
    ],
    ids=["warning", "info", "went-on", "too-short"],
)
def test_a_message_logged_followed_or_too_short_leaves_the_start_under_way(lines):
    assert not both_paths(lines).failed


def test_a_frames_code_line_is_not_the_message():
    """A traceback's code line quoting the message (its paste cut after it) is the
    traceback's shape, not the message raised."""
    verdict = both_paths([COMMAND, f'        raise ValueError(f"{QUANT}")'])
    assert verdict.rule == "log-ends-in-traceback"


def test_a_failure_or_a_ready_server_is_not_changed():
    failed = both_paths([COMMAND, "torch.OutOfMemoryError: CUDA out of memory.", QUANT])
    assert failed.category is Category.OOM
    ready = [COMMAND, "INFO:     Application startup complete.", QUANT]
    assert both_paths(ready).state is State.READY


class _Pipe(io.RawIOBase):
    """A stream that cannot seek (a pipe)."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)
