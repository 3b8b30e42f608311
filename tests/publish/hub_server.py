"""A stand-in for the Hugging Face Hub's HTTP API on 127.0.0.1, enough for ``huggingface_hub`` to create a
repo and a branch and commit files (every file uploaded inline, the "regular" mode), recording each request."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOKEN = "hf_secret_token_for_the_test_0123456789"  # HF_TOKEN of the tests: never to be seen anywhere else


@dataclass
class Request:
    method: str
    path: str
    authorization: str | None
    body: bytes


@dataclass
class FakeHub:
    """``url`` for HF_ENDPOINT; ``requests`` as received; ``commits``: (repo, revision, message, {path: bytes});
    ``fail_commits``: answer this many commits with HTTP 500 first."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    commits: list[tuple[str, str, str, dict[str, bytes]]] = field(default_factory=list)
    branches: list[tuple[str, str]] = field(default_factory=list)
    created: list[dict] = field(default_factory=list)
    fail_commits: int = 0


def start_hub() -> tuple[FakeHub, ThreadingHTTPServer]:
    hub = FakeHub()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            hub.requests.append(Request(self.command, self.path, self.headers.get("Authorization"), body))
            parts = self.path.split("?")[0].strip("/").split("/")
            if self.path.startswith("/api/repos/create"):
                request = json.loads(body)
                hub.created.append(request)
                return self._reply({"url": f"{hub.url}/{request['organization']}/{request['name']}"})
            if self.path.startswith(
                "/api/validate-yaml"
            ):  # the client checks a README.md's YAML header first
                return self._reply({"errors": [], "warnings": []})
            if parts[:2] == ["api", "models"] and len(parts) >= 6:
                repo, action, revision = f"{parts[2]}/{parts[3]}", parts[4], "/".join(parts[5:])
                if action == "branch":
                    hub.branches.append((repo, revision))
                    return self._reply({})
                if action == "preupload":
                    files = json.loads(body)["files"]
                    return self._reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                  for f in files]})  # fmt: skip
                if action == "commit":
                    if hub.fail_commits > 0:
                        hub.fail_commits -= 1
                        return self._reply({"error": "the hub is having a bad day"}, 500)
                    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                    message = next(line["value"]["summary"] for line in lines if line["key"] == "header")
                    files = {line["value"]["path"]: base64.b64decode(line["value"]["content"])
                             for line in lines if line["key"] == "file"}  # fmt: skip
                    hub.commits.append((repo, revision, message, files))
                    oid = f"{len(hub.commits):040x}"
                    return self._reply({"commitUrl": f"{hub.url}/{repo}/commit/{oid}", "commitOid": oid})
            self._reply({"error": f"not served here: {self.command} {self.path}"}, 404)

        def _reply(self, payload: dict, status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_HEAD = _handle

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return hub, server


@pytest.fixture
def hub(monkeypatch):
    """The stand-in Hub, with HF_ENDPOINT and HF_TOKEN pointing huggingface_hub at it."""
    hub, server = start_hub()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield hub
    server.shutdown()
