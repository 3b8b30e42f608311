"""Uploads to the Hugging Face Hub (``huggingface_hub``): an exported model folder, and a training run's
checkpoints as they are written.

The endpoint is ``HF_ENDPOINT`` (the Hub by default; a test points it at 127.0.0.1), the token is
``huggingface_hub``'s own: ``HF_TOKEN`` or ``hf auth login``. It is never an argument, a config field, a log
line or an event here, so it cannot reach the run dir.

``CheckpointUploader`` (``train --hf-upload-checkpoints``, the reference trainer's flags) uploads from a
background thread so training never waits on the network: each checkpoint's files are read into memory when
it is submitted (the next checkpoint replaces them on disk), committed under ``checkpoint-<step>/`` on the
revision, and retried with a doubling pause; a checkpoint that still fails is logged and recorded, never
raised. ``close`` waits for the queue and returns what happened to each.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asr_pipeline.models.loading import is_export, is_finetuned_export

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubTarget:
    repo_id: str
    revision: str = "main"
    private: bool = False

    def __post_init__(self) -> None:
        if self.repo_id.count("/") != 1 or not all(self.repo_id.split("/")):
            raise ValueError(f"repo id must be <namespace>/<name>, got {self.repo_id!r}")


def hub_api() -> Any:
    """An ``HfApi`` on ``HF_ENDPOINT`` as it is now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def require_token() -> None:
    """Refuse to upload without a token, before any request: the Hub would answer an anonymous upload with
    "401 Invalid username or password", which does not say that no token was sent. The token itself is never
    read here beyond asking whether there is one."""
    from huggingface_hub import constants, get_token

    if get_token() is None:
        raise PermissionError(
            "no Hugging Face token found: set HF_TOKEN, or run `hf auth login` (it writes "
            f"{constants.HF_TOKEN_PATH}; HF_HOME or HF_TOKEN_PATH move that file); nothing was uploaded"
        )


def ensure_repo(api: Any, target: HubTarget) -> None:
    """The model repo (created private when asked; an existing one is kept as it is) and the revision's
    branch when it is not main."""
    api.create_repo(target.repo_id, private=target.private, exist_ok=True, repo_type="model")
    if target.revision != "main":
        api.create_branch(target.repo_id, branch=target.revision, exist_ok=True, repo_type="model")


def publish_folder(folder: str | Path, target: HubTarget, message: str | None = None) -> str:
    """Upload an exported model folder to ``target``: one of our models (``publish.export``) or a fine-tuned
    pretrained one (``hf_finetune.export``); returns the commit's URL."""
    folder = Path(folder)
    if not is_export(folder) and not is_finetuned_export(folder):
        raise ValueError(
            f"{folder} is not an exported model folder (no config.json of asr_pipeline-export, nor an "
            "hf_finetune export's training_config.json, config.json and README.md); make one with "
            "`asr-pipeline export --run-dir RUN --output DIR`"
        )
    require_token()
    api = hub_api()
    try:
        ensure_repo(api, target)
        commit = api.upload_folder(
            repo_id=target.repo_id,
            folder_path=str(folder),
            revision=target.revision,
            commit_message=message or f"Upload {folder.name}",
            repo_type="model",
        )
    except Exception as error:  # huggingface_hub's HTTP and connection errors: one line for the caller
        raise ConnectionError(f"uploading {folder} to {api.endpoint} {target.repo_id}: {error}") from error
    return str(commit)


@dataclass
class UploadResult:
    step: int
    ok: bool
    attempts: int
    error: str | None = None


class CheckpointUploader:
    """Background uploads of checkpoints to one target (module docstring); rank 0 owns one."""

    def __init__(self, target: HubTarget, retries: int = 3, first_pause_sec: float = 1.0) -> None:
        self.target, self.retries, self.first_pause_sec = target, retries, first_pause_sec
        self.results: list[UploadResult] = []
        self._jobs: queue.Queue[tuple[int, dict[str, bytes]] | None] = queue.Queue()
        self._api: Any = None
        self._thread = threading.Thread(target=self._work, name="hf-checkpoint-upload", daemon=True)
        self._thread.start()

    def submit(self, step: int, files: Mapping[str, bytes]) -> None:
        """Queue ``files`` (name in the checkpoint folder -> content) as the checkpoint of ``step``."""
        self._jobs.put((step, dict(files)))

    def close(self, timeout_sec: float | None = None) -> list[UploadResult]:
        """Wait for the queued uploads (at most ``timeout_sec``); what happened to each, in order."""
        self._jobs.put(None)
        self._thread.join(timeout_sec)
        return list(self.results)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            step, files = job
            result = UploadResult(step, ok=False, attempts=0)
            pause = self.first_pause_sec
            while result.attempts < self.retries and not result.ok:
                result.attempts += 1
                try:
                    self._upload(step, files)
                    result.ok, result.error = True, None
                except Exception as error:  # any failure: logged and retried, never raised into training
                    result.error = f"{type(error).__name__}: {error}"
                    log.warning(
                        "uploading the checkpoint of step %d to %s failed (attempt %d of %d): %s",
                        step, self.target.repo_id, result.attempts, self.retries, result.error,
                    )  # fmt: skip
                    if result.attempts < self.retries:
                        time.sleep(pause)
                        pause *= 2
            self.results.append(result)

    def _upload(self, step: int, files: Mapping[str, bytes]) -> None:
        from huggingface_hub import CommitOperationAdd

        if self._api is None:
            api = hub_api()
            ensure_repo(api, self.target)
            self._api = api
        folder = f"checkpoint-{step:08d}"
        self._api.create_commit(
            repo_id=self.target.repo_id,
            operations=[CommitOperationAdd(f"{folder}/{name}", content) for name, content in files.items()],
            commit_message=f"Checkpoint at step {step}",
            revision=self.target.revision,
            repo_type="model",
        )


__all__ = [
    "CheckpointUploader",
    "HubTarget",
    "UploadResult",
    "ensure_repo",
    "hub_api",
    "publish_folder",
    "require_token",
]
