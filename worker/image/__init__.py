"""The image's build step: bake a model into the image (``bake``, run as
``python -m worker.image.bake`` by the Dockerfile).

May import: nothing of ``worker`` (it runs at build time, alone); the secret rule
(``diagnostics.redaction``). Imported by: nobody
(the Dockerfile runs it).
"""
