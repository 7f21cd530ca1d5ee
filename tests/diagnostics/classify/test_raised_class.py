"""The class a wrapper's message names is the class raised (diagnostics/classify/
raised_class.py): judged by where it was raised as that class would be."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths


def _frame(path: str, function: str) -> str:
    return f'  File "/usr/local/lib/python3.12/dist-packages/{path}", line 163, in {function}'


def _traceback(path: str, function: str, code: str, last: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        _frame("torch/_inductor/fx_passes/post_grad.py", "post_grad_passes"),
        "    config.post_grad_custom_post_pass(gm.graph)",
        _frame(path, function),
        code,
        last,
    ]


@pytest.mark.parametrize(
    "last",
    [
        "torch._inductor.exc.InductorError: AssertionError: ",
        "torch._inductor.exc.InductorError: AssertionError:",
        "RuntimeError: AssertionError: ",
    ],
)
def test_an_assertion_carried_by_a_wrapper_in_vllms_code_is_permanent(last):
    """torch's compiler wraps what vLLM's graph pass raised: the assertion is vLLM's own
    check, the same on every start; the cause quotes the asserted expression, not the
    class again."""
    lines = _traceback(
        "vllm/compilation/fix_functionalization.py",
        "replace_users_with_mutated_args",
        "    assert user.target == operator.getitem",
        last,
    )
    diagnosis = both_paths(lines)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "AssertionError raised in vllm/compilation/fix_functionalization.py" in (
        diagnosis.cause or ""
    )
    assert "assert user.target == operator.getitem" in (diagnosis.cause or "")
    assert ": AssertionError" not in (diagnosis.cause or "")


def test_the_same_wrapper_raised_outside_vllm_stays_transient():
    """Raised in torch's own lowering: vLLM's determinism says nothing about it."""
    lines = _traceback(
        "torch/_inductor/lowering.py",
        "view_dtype",
        "    assert x.get_dtype().itemsize == dtype.itemsize",
        "torch._inductor.exc.InductorError: AssertionError: ",
    )
    assert both_paths(lines).state is State.FAILED_TRANSIENT


@pytest.mark.parametrize(
    "last",
    [
        # a message that begins with a word ending in "Error" but no class and colon
        "torch._inductor.exc.InductorError: Error compiling the graph",
        # a wrapper whose message names no class: the wrapper stays the class raised
        "torch._inductor.exc.InductorError: something unexpected",
    ],
)
def test_a_wrapper_whose_message_names_no_class_stays_the_wrapper(last):
    lines = _traceback(
        "vllm/compilation/fix_functionalization.py",
        "replace_users_with_mutated_args",
        "    raise InductorError(...)",
        last,
    )
    # InductorError is no deterministic type: a restart may help
    assert both_paths(lines).state is State.FAILED_TRANSIENT
