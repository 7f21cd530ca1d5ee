"""The image's build step: bake a model into the image (``bake``, run as
``python -m worker.image.bake`` by the Dockerfile): which files to download
(``download_plan``), the token and the endpoint kept out of what is printed
(``credentials``), a failure as one line (``errors``).

May import: nothing of ``worker`` outside this folder (it runs at build time, alone);
the secret rule (``diagnostics.redaction``). Imported by: nobody (the Dockerfile runs
it).
"""
