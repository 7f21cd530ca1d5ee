"""A value the start was set to, quoted by an error (diagnostics/classify/chosen.py)."""

from __future__ import annotations

import pytest

from diagnostics.classify.chosen import chosen_setting

SETTINGS = (
    "model='org/m', dtype='auto', kv_cache_dtype=\"fp8_e5m2\", "
    "pooler_config=PoolerConfig(pooling_type='AVG'), 'attention_backend': 'FLASHINFERX'"
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("'AVG'", "pooling_type='AVG'"),
        ('Unsupported KV cache dtype "fp8_e5m2" on this GPU', 'kv_cache_dtype="fp8_e5m2"'),
        ("Unknown backend 'FLASHINFERX'", "attention_backend='FLASHINFERX'"),
        ("'auto'", None),  # a default every start has names no choice
        ("'model.layers.0.weight'", None),  # no setting holds it
        ("no quotes at all", None),
        # a value named bare at the message's end, after a colon
        ("Unsupported connector type: FLASHINFERX", "attention_backend='FLASHINFERX'"),
        ("Unsupported dtype: auto", None),
    ],
)
def test_the_setting_an_error_quotes_is_named(message, expected):
    assert chosen_setting(message, SETTINGS) == expected


def test_without_settings_nothing_is_named():
    assert chosen_setting("'AVG'", "") is None
