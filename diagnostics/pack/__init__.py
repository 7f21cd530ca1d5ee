"""The rule pack and matching: ``rules/*.yaml`` -> a validated ``RulePack``.

Owns: loading and caching the pack (``rules``, ``dbcache``), the command's cache of its
``re`` patterns (``regexcache``), its values (``pack``),
validation (``packcheck``), RE2 + Hyperscan matching (``matching``), ``transient_if``
evidence and the provenance section (``evidence``).

May import: ``diagnostics.model``. Imported by: ``diagnostics.classify``,
``diagnostics.scanning``, ``diagnostics.command``, and ``worker``.
"""
