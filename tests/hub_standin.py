"""A small local stand-in for the Hugging Face Hub HTTP API, for publishing tests.

It speaks the endpoints ``huggingface_hub`` 2.x uses to create a repository, commit files
(``preupload`` answers "regular" for every file, so contents travel base64-encoded inside the
NDJSON commit and no LFS/Xet storage is involved), tag, list refs and trees, and serve files
(``resolve``) — enough for ``HfApi.create_commit`` / ``create_tag`` and ``snapshot_download`` to
run their real code against it. Every request is recorded for the assertions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Repo:
    private: bool
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    prs: dict[str, str] = field(default_factory=dict)


class HubStandIn:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _send(
                self,
                status: int,
                payload: Any = None,
                *,
                raw: bytes | None = None,
                headers: dict[str, str] | None = None,
                head: bool = False,
            ) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type",
                    "application/json" if raw is None else "application/octet-stream",
                )
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlsplit(self.path)
                body = self._body() if method == "POST" else b""
                with hub.lock:
                    hub.requests.append(
                        {
                            "method": method,
                            "path": url.path,
                            "query": parse_qs(url.query),
                            "authorization": self.headers.get("authorization"),
                        }
                    )
                    try:
                        status, payload, raw, headers = hub.route(method, url, body, self.headers)
                    except KeyError as exc:
                        status, payload, raw, headers = (
                            404,
                            {"error": str(exc)},
                            None,
                            {"X-Error-Code": "RepoNotFound"},
                        )
                self._send(status, payload, raw=raw, headers=headers, head=method == "HEAD")

            def do_GET(self) -> None:
                self._handle("GET")

            def do_HEAD(self) -> None:
                self._handle("HEAD")

            def do_POST(self) -> None:
                self._handle("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- state helpers ---------------------------------------------------------------------------
    def resolve(self, repo: Repo, rev: str) -> str:
        rev = unquote(rev)
        if rev in repo.branches:
            return repo.branches[rev]
        if rev in repo.tags:
            return repo.tags[rev]
        if rev in repo.prs:
            return repo.prs[rev]
        if rev in repo.commits:
            return rev
        raise KeyError(f"revision {rev}")

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        repo = self.repos[repo_id]
        return repo.commits[self.resolve(repo, rev)]

    # -- routing ---------------------------------------------------------------------------------
    def route(self, method: str, url: Any, body: bytes, headers: Any):
        path = url.path
        query = parse_qs(url.query)
        if path == "/api/repos/create" and method == "POST":
            data = json.loads(body)
            repo_id = f"{data['organization']}/{data['name']}"
            if repo_id in self.repos:
                return 409, {"error": "exists"}, None, {}
            self.repos[repo_id] = Repo(private=data.get("visibility") == "private")
            return 200, {"url": f"{self.url}/datasets/{repo_id}"}, None, {}
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}, None, {}
        m = re.match(
            r"^/api/datasets/([^/]+/[^/]+)/(preupload|commit|tag|revision|tree)/([^/]+)(/.*)?$",
            path,
        )
        if m:
            repo_id, action, rev = m.group(1), m.group(2), m.group(3)
            repo = self.repos[repo_id]
            if action == "preupload":
                files = json.loads(body)["files"]
                return (
                    200,
                    {
                        "files": [
                            {
                                "path": f["path"],
                                "uploadMode": "regular",
                                "shouldIgnore": False,
                                "oid": None,
                            }
                            for f in files
                        ]
                    },
                    None,
                    {},
                )
            if action == "commit":
                return self._commit(repo_id, repo, unquote(rev), body, "create_pr" in query)
            if action == "tag":
                tag = json.loads(body)["tag"]
                if tag in repo.tags:
                    return 409, {"error": "tag exists"}, None, {}
                repo.tags[tag] = self.resolve(repo, rev)
                return 200, {}, None, {}
            sha = self.resolve(repo, rev)
            files = repo.commits[sha]
            if action == "revision":
                return (
                    200,
                    {
                        "id": repo_id,
                        "sha": sha,
                        "private": repo.private,
                        "siblings": [{"rfilename": p} for p in sorted(files)],
                    },
                    None,
                    {},
                )
            return (
                200,
                [
                    {"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for p, b in sorted(files.items())
                ],
                None,
                {},
            )
        m = re.match(r"^/api/datasets/([^/]+/[^/]+)/refs$", path)
        if m:
            repo = self.repos[m.group(1)]

            def ref(name: str, kind: str, target: str) -> dict[str, str]:
                return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": target}

            return (
                200,
                {
                    "branches": [ref(b, "heads", t) for b, t in repo.branches.items()],
                    "converts": [],
                    "tags": [ref(t, "tags", c) for t, c in repo.tags.items()],
                    "pullRequests": [],
                },
                None,
                {},
            )
        m = re.match(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            repo = self.repos[m.group(1)]
            sha = self.resolve(repo, m.group(2))
            files = repo.commits[sha]
            name = unquote(m.group(3))
            if name not in files:
                return 404, {"error": "entry not found"}, None, {"X-Error-Code": "EntryNotFound"}
            data = files[name]
            return (
                200,
                None,
                data,
                {
                    "X-Repo-Commit": sha,
                    "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                },
            )
        return 404, {"error": f"no route {method} {path}"}, None, {}

    def _commit(self, repo_id: str, repo: Repo, rev: str, body: bytes, create_pr: bool):
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = lines[0]["value"]
        parent = repo.branches.get(rev)
        files = dict(repo.commits[parent]) if parent else {}
        for item in lines[1:]:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                files.pop(value["path"])
            else:
                return 400, {"error": f"unsupported operation {item['key']}"}, None, {}
        digest = hashlib.sha1(
            json.dumps(
                [parent, header, sorted((p, hashlib.sha1(b).hexdigest()) for p, b in files.items())]
            ).encode()
        ).hexdigest()
        repo.commits[digest] = files
        repo.messages[digest] = header["summary"]
        pr_url = None
        if create_pr:
            num = str(len(repo.prs) + 1)
            repo.prs[f"refs/pr/{num}"] = digest
            pr_url = f"{self.url}/datasets/{repo_id}/discussions/{num}"
        else:
            repo.branches[rev] = digest
        return (
            200,
            {
                "commitUrl": f"{self.url}/datasets/{repo_id}/commit/{digest}",
                "commitOid": digest,
                "pullRequestUrl": pr_url,
            },
            None,
            {},
        )
