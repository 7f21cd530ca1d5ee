"""Generate the rule that tells a tokenizer class transformers ships from a repository's own.

transformers' AutoTokenizer says "Tokenizer class X does not exist or is not currently
imported" for a class a model's tokenizer_config.json names and transformers cannot
find. X is either a class transformers ships (in a release newer than the installed one,
or under an older spelling, LLaMATokenizer for LlamaTokenizer): what this vLLM and
transformers cannot run, model_requirement; or a class transformers has never shipped:
the repository's own code (QWenTokenizer, ChatGLM4Tokenizer, InternLM2Tokenizer), which
only trust_remote_code loads, remote_code.

The classes transformers ships are data, read from the releases
(``transformers/models/auto/tokenization_auto.py``: ``TOKENIZER_MAPPING_NAMES``, every
name ending in Tokenizer or TokenizerFast) into ``fixtures/catalogue/tokenizer-classes.json``;
this script writes ``rules/38-tokenizer-classes.yaml`` from it: both rules
(``tokenizer-class-newer-than-transformers``, the names matched in any case, first;
``tokenizer-class-not-found`` for any other name), from one list of transformers'
wordings (``WORDINGS``); and ``rules/89-tokenizer-attributes.yaml``, among the generic
rules: an attribute a tokenizer class lacks when code reads it ("'ChatGLMTokenizer'
object has no attribute 'tokenizer'") is the repository's own tokenizer written for
another transformers (``remote-tokenizer-lacks-attribute``), unless transformers or vLLM
ships the class (``tokenizer-of-the-libraries-lacks-attribute``, first: an exception as
any other).

    python scripts/gen_tokenizer_rule.py --mine transformers-4.34.1-py3-none-any.whl ...
    python scripts/gen_tokenizer_rule.py            # write the rule
    python scripts/gen_tokenizer_rule.py --check    # exit 1 if out of date
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from generated import write_or_check  # noqa: E402

DATA = ROOT / "fixtures" / "catalogue" / "tokenizer-classes.json"
OUT = ROOT / "rules" / "38-tokenizer-classes.yaml"
ATTRIBUTES = ROOT / "rules" / "89-tokenizer-attributes.yaml"
_NAME = re.compile(r"[\"']([A-Z]\w*Tokenizer(?:Fast)?)[\"']")
_VERSION = re.compile(r"transformers-(\d[\w.]*)-")
# transformers' base classes, which a tokenizer_config.json may name too
BASES = ("PreTrainedTokenizer", "PreTrainedTokenizerFast")
# vLLM's own tokenizer classes (vLLM 0.32's vllm/tokenizers and earlier releases'
# transformers_utils/tokenizers) and the prefix of its cached copy of any tokenizer
# ("CachedQwen2TokenizerFast"): an attribute one lacks is vLLM's and transformers' code
# meeting, not a repository's own.
VLLM_CLASSES = (
    "MistralTokenizer",
    "DeepseekV32Tokenizer",
    "DeepseekV4Tokenizer",
    "DeepseekV41Tokenizer",
    "HfTokenizer",
    "CachedHfTokenizer",
)
CACHED = "(?:Cached)?"
# An exception line (YAML-quoted): an attribute a tokenizer class lacks when code reads it.
LACKS = "'\\bAttributeError: ''CLS'' object has no attribute ''(?P<attr>\\w+)'''"
# The same line read as any exception (unhandled-exception's captures: its cause's words).
LACKS_AS_ANY = "'\\b(?P<exc>AttributeError): (?P<detail>''CLS'' object has no attribute ''\\w+'')'"
# AutoTokenizer's wordings for a class it cannot find (4.x and 5.x), as YAML-quoted
# regexes; CLS stands for the class name's group (written without a backslash, so it
# reads the same in either quoting).
WORDINGS = (
    "'\\bTokenizer class CLS does not exist or is not currently imported'",
    "\"\\\\bTokenizer class '?CLS'? specified in the tokenizer config\"",
    "'\\bTokenizer class CLS is not currently imported'",
)


def mine(wheels: list[str]) -> dict:
    """The tokenizer classes named in each release's auto-tokenizer table."""
    classes: set[str] = set(BASES)
    releases = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            source = archive.read("transformers/models/auto/tokenization_auto.py").decode()
        start = source.index("TOKENIZER_MAPPING_NAMES")
        end = source.find("TOKENIZER_MAPPING =", start)
        classes |= set(_NAME.findall(source[start : end if end > 0 else None]))
        found = _VERSION.search(Path(wheel).name)
        releases.append(found.group(1) if found else Path(wheel).name)
    return {"releases": sorted(releases), "classes": sorted(classes)}


def _patterns(cls: str) -> list[str]:
    return [f"      - {wording.replace('CLS', cls)}" for wording in WORDINGS]


def _worded(file: str, rule_id: str, key: str) -> list[str]:
    """A rule's ``cause`` or ``fix`` as ``rules/<file>`` words it (one source for the words
    the generated rules share with it), as the lines of a YAML folded block."""
    rules = yaml.safe_load((ROOT / "rules" / file).read_text(encoding="utf-8"))
    text = next(r[key] for r in rules["rules"] if r["id"] == rule_id)
    return [f"    {key}: >-  # {rule_id}'s ({file}), read by the generator"] + [
        f"      {line}" for line in textwrap.wrap(text, 82)
    ]


def render(data: dict) -> str:
    names = "|".join(data["classes"])
    known = f"(?P<cls>(?i:{names}))"
    lines = [
        "# Generated by scripts/gen_tokenizer_rule.py from",
        "# fixtures/catalogue/tokenizer-classes.json",
        f"# (transformers {', '.join(data['releases'])}): do not edit.",
        "rules:",
        "  - id: tokenizer-class-newer-than-transformers",
        "    category: model_requirement",
        "    permanent: true",
        "    note: >-",
        "      A tokenizer class transformers ships (its auto-tokenizer table, in any case: an",
        "      older spelling such as LLaMATokenizer too) that the installed transformers",
        "      could not find: the model needs a newer transformers (or names the class under a",
        "      spelling no release has). A class no release ships is the repository's own",
        "      code (tokenizer-class-not-found, remote_code).",
        "    patterns:",
        *_patterns(known),
        "    cause: >-",
        "      The model's tokenizer_config.json names {cls}, a tokenizer class of transformers",
        "      that the installed transformers does not have (it is newer, or the model names",
        "      it under an older spelling).",
        "    fix: >-",
        "      Use an image with a newer vLLM and transformers that know {cls}; if the model",
        "      names an old spelling (LLaMATokenizer for LlamaTokenizer), use a checkpoint whose",
        "      tokenizer_config.json names the current class.",
        "",
        "  - id: tokenizer-class-not-found",
        "    category: remote_code",
        "    permanent: true",
        "    note: >-",
        "      transformers' AutoTokenizer cannot find the tokenizer class a model's",
        "      tokenizer_config.json names, and the class is none transformers has ever",
        "      shipped (those are the rule above): the repository's own code (QWenTokenizer,",
        "      ChatGLM4Tokenizer, InternLM2Tokenizer), which only trust_remote_code loads;",
        "      vLLM's own reading of it (remote-code-required) says so when trust_remote_code",
        "      is off.",
        "    patterns:",
        *_patterns("(?P<cls>[A-Za-z0-9_.]+)"),
        "    cause: >-",
        "      The model's tokenizer_config.json names the tokenizer class {cls}, which",
        "      transformers does not ship: it is the model repository's own code, which vLLM",
        "      runs only when allowed to.",
        "    fix: >-",
        "      If you trust the repository's code, set TRUST_REMOTE_CODE=true (its",
        "      tokenizer_config.json must list {cls} under auto_map; a converted checkpoint",
        "      that lost it needs the original repository's tokenizer files).",
        "",
    ]
    return "\n".join(lines)


def render_attributes(data: dict) -> str:
    """The two rules of a tokenizer class that lacks an attribute, among the generic ones
    (a rule that reads transformers' and vLLM's classes as any exception must come
    before the one that reads every other class, and it is generic)."""
    ours = f"(?P<cls>{'|'.join(sorted({*data['classes'], *VLLM_CLASSES}))})"
    lines = [
        "# Generated by scripts/gen_tokenizer_rule.py from",
        "# fixtures/catalogue/tokenizer-classes.json",
        f"# (transformers {', '.join(data['releases'])}): do not edit.",
        "rules:",
        "  - id: tokenizer-of-the-libraries-lacks-attribute",
        "    kind: structure",
        "    category: other",
        "    permanent: false",
        "    generic: true",
        "    note: >-",
        "      An attribute a tokenizer class of transformers or of vLLM lacks when code reads",
        "      it: what reads it is unknown from the line (vLLM and transformers of versions",
        "      that do not meet, a request's use), so an exception as any other",
        "      (unhandled-exception's reading); the rule is here so that the one below reads",
        "      only the classes no library ships.",
        "    when:",
        "      before_ready: true",
        "    patterns:",
        f"      - {LACKS_AS_ANY.replace('CLS', CACHED + ours)}",
        *_worded("90-generic.yaml", "unhandled-exception", "cause"),
        *_worded("90-generic.yaml", "unhandled-exception", "fix"),
        "",
        "  - id: remote-tokenizer-lacks-attribute",
        "    kind: structure",
        "    category: remote_code",
        "    permanent: true",
        "    generic: true",
        "    note: >-",
        "      An attribute a tokenizer class lacks when its code reads it, the class none",
        "      transformers or vLLM ships (those are the rule above): the repository's own",
        "      tokenizer code (ChatGLMTokenizer, BaichuanTokenizer), written for another",
        "      transformers (4.34 began calling a tokenizer's methods before a subclass's",
        "      __init__ sets what they read): so on every start on this image, also where a",
        "      paste keeps the exception line alone (remote-code-tokenizer-broken reads it",
        "      with the sign that the repository's code ran).",
        "    when:",
        "      before_ready: true",
        "    patterns:",
        f"      - {LACKS.replace('CLS', CACHED + '(?P<cls>[A-Za-z0-9_]+Tokenizer(?:Fast)?)')}",
        *_worded("30-hub.yaml", "remote-code-tokenizer-broken", "cause"),
        *_worded("30-hub.yaml", "remote-code-tokenizer-broken", "fix"),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--mine"]:
        DATA.write_text(json.dumps(mine(argv[1:]), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {DATA.relative_to(ROOT)}")
        return 0
    data = json.loads(DATA.read_text(encoding="utf-8"))
    script = "gen_tokenizer_rule.py"
    return write_or_check(OUT, render(data), argv, script) | write_or_check(
        ATTRIBUTES, render_attributes(data), argv, script
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
