"""An exception logged as its repr before its traceback (vLLM 0.6's engine:
``logger.exception(repr(e))``) stands for that traceback's exception line, as an
IPython header does: the exception line, which shows where it was raised, takes its
place, so an exception no specific rule names is judged by provenance (held-out QA: a
model repository's tokenizer code failing with this transformers). Both paths."""

from __future__ import annotations

from diagnostics.classify.linereading import logged_repr
from diagnostics.model import Category, State
from tests.support.packs import both_paths

P = "ERROR 10-29 07:51:17 engine.py:160] "
REPR = P + "AttributeError(\"'ChatGLMTokenizer' object has no attribute 'tokenizer'\")"
TRACEBACK = [
    P + "Traceback (most recent call last):",
    P + '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/'
    'engine.py", line 158, in start',
    P + '  File "/usr/local/lib/python3.12/dist-packages/transformers/models/auto/'
    'tokenization_auto.py", line 907, in from_pretrained',
    P + "    return tokenizer_class.from_pretrained(pretrained_model_name_or_path)",
    P + '  File "/root/.cache/huggingface/modules/transformers_modules/THUDM/chatglm3-6b/'
    '91a0561c/tokenization_chatglm.py", line 121, in vocab_size',
    P + "    return self.tokenizer.n_words",
    P + "AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'",
]


def test_the_traceback_after_a_logged_repr_judges_it():
    verdict = both_paths([REPR, *TRACEBACK])
    assert (verdict.category, verdict.state) == (Category.REMOTE_CODE, State.FAILED_PERMANENT)
    assert verdict.evidence is not None and verdict.evidence.line == 1 + len(TRACEBACK)


def test_a_logged_repr_alone_is_the_generic_exception_it_was():
    verdict = both_paths([P + "AttributeError(\"'NoneType' object has no attribute 'shape'\")"])
    assert (verdict.rule, verdict.state) == ("unhandled-exception", State.FAILED_TRANSIENT)


def test_a_logged_repr_alone_is_read_by_its_words():
    """A tokenizer class no library ships, without the attribute its code reads: the
    repository's own tokenizer, whatever shape the exception is printed in."""
    verdict = both_paths([REPR])
    assert (verdict.rule, verdict.state) == (
        "remote-tokenizer-lacks-attribute",
        State.FAILED_PERMANENT,
    )


def test_what_a_logged_repr_is():
    assert logged_repr("ValueError: bad", "ERROR x] ValueError('bad')")
    assert logged_repr("ValueError: bad", 'ValueError("bad")')
    assert not logged_repr("ValueError: bad", "ValueError: bad")
    assert not logged_repr("ValueError: bad ('x')", "ValueError: bad ('x')")
