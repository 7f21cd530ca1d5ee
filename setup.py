"""Package discovery that pyproject.toml alone cannot express: every package under
worker/ and diagnostics/ (found, so a new subpackage ships without a list to update),
plus the rule pack, which lives in rules/ and installs as ``diagnostics.rulepack``
(package-dir and package-data are in pyproject.toml)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["worker", "worker.*", "diagnostics", "diagnostics.*"]),
        "diagnostics.rulepack",
    ]
)
