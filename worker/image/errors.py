"""A failed download as one line: the huggingface_hub failure explained (``explain``)
as a ``BakeError`` that names the repo and the build arg to change, with the token and
the endpoint's credentials taken out (``worker.image.credentials``)."""

from __future__ import annotations

from worker.image.credentials import hide, public_endpoint, secrets_of
from worker.image.download_plan import Repo


class BakeError(Exception):
    """Raised when a repo cannot be baked; the message is one line that names the fix."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def explain(exc: Exception, repo: Repo, token: str | None, endpoint: str) -> BakeError:
    """The huggingface_hub failure as one line naming the repo and the build arg to fix,
    with the token and the endpoint's credentials taken out."""
    explained = _explain_raw(exc, repo, token, public_endpoint(endpoint))
    return BakeError(hide(str(explained), secrets_of(token, endpoint)))


def _explain_raw(exc: Exception, repo: Repo, token: str | None, endpoint: str) -> BakeError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    name = repo.repo_id
    if isinstance(exc, GatedRepoError):
        if token is None:
            return BakeError(
                f"{name} is a gated model and no token was given: set the HF_TOKEN secret "
                "(docker build --secret id=HF_TOKEN,env=HF_TOKEN ...) to a token of an "
                f"account that has accepted the model's terms on {endpoint}/{name}"
            )
        return BakeError(
            f"{name} is a gated model and the HF_TOKEN secret has no access to it: accept "
            f"the model's terms on {endpoint}/{name} with the token's account, or set the "
            "HF_TOKEN secret to a token that has access"
        )
    if isinstance(exc, RevisionNotFoundError):
        return BakeError(
            f"{name} has no revision {repo.revision!r}: set {repo.revision_var} to a branch, "
            "tag or commit of the repo"
        )
    if isinstance(exc, RepositoryNotFoundError):
        private = "" if token else " (a private repo also needs the HF_TOKEN secret)"
        return BakeError(f"repo {name} was not found on {endpoint}: check {repo.name_var}{private}")
    if isinstance(exc, HFValidationError):
        return BakeError(
            f"{repo.name_var}={name!r} is not a Hugging Face repo id (like org/model): "
            f"{_one_line(exc)}"
        )
    if isinstance(exc, OSError) and exc.filename:
        return BakeError(f"cannot write {exc.filename}: {exc.strerror or exc}")
    return BakeError(f"cannot download {name} from {endpoint}: {_one_line(exc)}")
