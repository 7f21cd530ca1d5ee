"""The catalogue's miner (scripts/mine_catalogue.py) on built source trees: ``assert``
statements with a message are raise sites (an AssertionError), marked so that the frame
provenance (scripts/gen_provenance.py) leaves them out; a message both raised and
asserted keeps its raise site. And the assign table's principle for two choices that
cannot go together, on the mined catalogue."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import yaml

from tests.support.packs import both_paths
from tests.support.scripts import load_script

MINER = load_script("mine_catalogue")
PROVENANCE = load_script("gen_provenance")
FULL = Path(__file__).resolve().parents[3] / "fixtures" / "catalogue" / "catalogue-full.jsonl"

ALLOCATOR = """
class CuMemAllocator:
    def __init__(self):
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        assert "expandable_segments:True" not in conf, (
            "Expandable segments are not compatible with memory pool. "
            f"Please track {URL} for the latest updates.")
        assert conf
"""


def test_an_assert_with_a_message_is_a_raise_site():
    found = MINER.messages(ast.parse(ALLOCATOR))
    assert found == [
        (
            MINER.ASSERT,
            "Expandable segments are not compatible with memory pool. "
            "Please track {} for the latest updates.",
            "CuMemAllocator.__init__",
        )
    ]  # the bare ``assert conf`` says nothing: not a message


PEFT = """
class PEFTHelper:
    def _validate_features(self):
        error_msg = []
        if self.use_dora:
            error_msg.append("vLLM does not yet support DoRA.")
        if self.bias != "none":
            error_msg.append(f"Adapter bias cannot be used for {self.name}.")
        items.append("not a message at all, only an item")
        return error_msg

    def validate(self):
        error_msg = self._validate_features()
        if error_msg:
            raise ValueError(f"{' '.join(error_msg)}")
"""


def test_the_parts_of_a_message_collected_in_a_list_are_messages():
    """A message whose parts are appended to a list and raised joined (vLLM's PEFTHelper)
    is read part by part; an append to a list of anything else is not a message."""
    found = MINER.messages(ast.parse(PEFT))
    assert found == [
        ("message", "vLLM does not yet support DoRA.", "PEFTHelper._validate_features"),
        ("message", "Adapter bias cannot be used for {}.", "PEFTHelper._validate_features"),
        ("ValueError", "{}", "PEFTHelper.validate"),  # only a field: mine() drops it
    ]


def _tree(root: Path, version: str, source: str) -> None:
    path = root / f"vllm-{version}" / "vllm" / "device_allocator" / "cumem.py"
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")


def test_an_asserted_message_is_marked_and_a_raise_of_it_wins(tmp_path):
    words = "Expandable segments are not compatible with memory pool. Please track"
    _tree(tmp_path, "0.9.0", ALLOCATOR + f"\ndef later():\n    assert ok, '{words} it.'\n")
    _tree(tmp_path, "0.10.0", f"def check():\n    raise ValueError('{words} it.')\n")
    entries = MINER.mine(tmp_path)
    asserted = entries[("vllm", f"{words} {{}} for the latest updates.")]
    assert asserted["exception"] == "AssertionError" and asserted["asserted"] is True
    both = entries[("vllm", f"{words} it.")]
    assert both["exception"] == "ValueError" and "asserted" not in both
    assert both["function"] == "check"


def test_frame_provenance_leaves_asserts_out():
    row = {"file": "vllm/model_executor/layers/kernel.py", "function": "forward"}
    asserted = {**row, "category": "model_requirement", "exception": "AssertionError"}
    raised = {**row, "category": "other", "exception": "RuntimeError"}
    marked = {**asserted, "asserted": True}
    data = PROVENANCE.derive([marked, marked, raised])
    assert data["functions"]["vllm/model_executor/layers/kernel.py:forward"] == "other"
    assert PROVENANCE.derive([{**asserted, "asserted": True}])["functions"] == {}


def _category(template: str) -> str:
    rows = [json.loads(line) for line in FULL.read_text(encoding="utf-8").splitlines()]
    return next(r["category"] for r in rows if r["template"] == template)


def test_two_choices_that_cannot_go_together_are_bad_config_outside_models_and_kernels():
    # the engine's and the allocator's checks: the start's own choices
    assert _category("chunked prefill cannot be used with prefix caching now.") == "bad_config"
    assert (
        _category(
            "Expandable segments are not compatible with memory pool. Please track "
            "https://github.com/pytorch/pytorch/issues/147851 for the latest updates."
        )
        == "bad_config"
    )
    # a platform's: what the hardware's backend cannot do
    assert (
        _category(
            "Chunked-prefill and prefix-cache on the CPU backend is not compatible with FP8 "
            "KV cache."
        )
        == "model_requirement"
    )


def test_a_catalogued_assertion_names_its_category_without_its_frames():
    line = (
        "AssertionError: Expandable segments are not compatible with memory pool. Please "
        "track https://github.com/pytorch/pytorch/issues/147851 for the latest updates."
    )
    diagnosis = both_paths([line])
    assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)
    assert diagnosis.rule == "catalogued-bad-config"


def test_post_releases_are_ordered_after_their_release():
    """The first and last version a message was seen in do not depend on set order."""
    versions = ["0.6.2", "0.6.1.post2", "0.6.1", "0.6.1.post1", "0.9.0.1", "0.9.0"]
    assert sorted(versions, key=MINER.version_key) == [
        "0.6.1",
        "0.6.1.post1",
        "0.6.1.post2",
        "0.6.2",
        "0.9.0",
        "0.9.0.1",
    ]


def test_the_utils_package_is_in_scope_and_the_argument_parser_is_the_users_command():
    """vLLM 0.11 split utils.py into the utils/ package: its modules are start-up code
    (the argument parser moved to utils/argparse_utils.py). What the parser rejects, in
    either layout, is the command line or the --config file: bad_config."""
    assert re.search(MINER.SCOPE["vllm"], "vllm/utils/argparse_utils.py")
    assert _category("Config file must be of a yaml/yml type. %s supplied") == "bad_config"
    assert _category("Config file must be of a yaml/yml type. {} supplied") == "bad_config"
    assert _category("Port must be between 1024 and 65535") == "bad_config"
    # the tensors a model's processor built are not an option
    assert _category("{} is an empty sequence") == "other"
    # Python prints an exception raised with two arguments as a tuple: still read
    line = "ValueError: ('Config file must be of a yaml/yml type.           %s supplied', 'json')"
    diagnosis = both_paths([line])
    assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)


def test_both_catalogues_are_what_the_assign_table_makes_of_their_messages():
    """``mine_catalogue.py --reassign`` was run after assign.yaml last changed: the
    complete catalogue and the current release's (which the classifier's index joins,
    dropping a wording they disagree on) are its output."""
    data = yaml.safe_load((FULL.parent / "assign.yaml").read_text(encoding="utf-8"))
    full, current = MINER.reassigned(data)
    on_disk = [json.loads(line) for line in FULL.read_text(encoding="utf-8").splitlines()]
    assert full == on_disk, "run python scripts/mine_catalogue.py --reassign"
    path = FULL.parent / "catalogue.jsonl"
    on_disk = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert current == on_disk, "run python scripts/mine_catalogue.py --reassign"


def test_the_pipelines_layer_partition_is_the_users_setting():
    """get_pp_indices checks only VLLM_PP_LAYER_PARTITION (its parse, its count against the
    pipeline's stages, its sum against the model's layers): bad_config, though the
    messages name the variable's parts only."""
    assert _category("sum(partitions)={} does not match num_hidden_layers={}.") == "bad_config"
    assert _category("len(partitions)={} does not match pp_size={}.") == "bad_config"
    line = "ValueError: sum(partitions)=40 does not match num_hidden_layers=80."
    diagnosis = both_paths([line])
    assert (str(diagnosis.category), diagnosis.permanent) == ("bad_config", True)


def test_a_message_part_collected_in_a_list_is_catalogued():
    # (an adapter's own LoRA feature vLLM lacks: what the adapter needs, as a model
    # without LoRA; assign.yaml)
    line = "ValueError: Call to add_lora method failed: vLLM does not yet support DoRA."
    diagnosis = both_paths([line])
    assert (str(diagnosis.category), diagnosis.permanent) == ("model_requirement", True)
    line = "ValueError: Adapter bias cannot be used without bias_enabled."
    diagnosis = both_paths([line])
    assert diagnosis.rule == "catalogued-bad-config"


def test_a_verify_function_of_a_kernel_or_a_quantization_checks_the_checkpoint():
    """verify/validate functions check the start's own options (bad_config), except in the
    kernels, quantization methods, platforms and attention backends, where they check what
    the checkpoint or the GPU supports (model_requirement), unless the message names an
    option the user chose."""
    template = (
        "Only support per-tensor scaling factor for compressed-tensors KV cache. Expected "
        "strategy: tensor, found strategy: {}"
    )
    assert _category(template) == "model_requirement"  # the checkpoint's KV-cache scheme
    assert _category("chunked prefill cannot be used with prefix caching now.") == "bad_config"
    marlin = (
        "Weight input_size_per_partition = {} is not divisible by group_size = {}. Consider "
        "reducing tensor_parallel_size or running with --quantization gptq."
    )
    assert _category(marlin) == "bad_config"  # names the options that resolve it
