"""A headless Chromium driven over the DevTools protocol: enough to load, click and read a page.

One page target, one websocket (``websocket-client``), one message at a time. Every event that
arrives while waiting for a reply is kept in :attr:`Chromium.events`, so a test can look at the
console messages, exceptions and network requests a page produced.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """``with Chromium(path, profile_dir) as c: c.call("Page.navigate", url=...)``."""

    def __init__(self, browser: str, profile: Path, timeout: float = 60.0) -> None:
        self.browser, self.profile, self.timeout = browser, profile, timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0

    def __enter__(self) -> Chromium:
        import websocket

        # Chromium leaves a singleton-socket folder in TMPDIR: give it one we remove on exit
        # (a short path: a unix socket path must fit in 108 bytes).
        self.tmp = tempfile.mkdtemp(prefix="chromium-")
        self.proc = subprocess.Popen(
            [self.browser, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "TMPDIR": self.tmp},
        )
        try:
            port = self._port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            page = next(t for t in targets if t["type"] == "page")
            # No Origin header: Chromium refuses websocket origins it was not told to allow.
            self.ws = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=self.timeout, suppress_origin=True
            )
        except BaseException:
            self.__exit__()  # no browser or temporary folder left behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "ws"):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _port(self) -> int:
        """The DevTools port Chromium picked (it writes it into the profile folder)."""
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            if marker.is_file() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; events meanwhile go to :attr:`events`."""
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str) -> dict[str, Any]:
        """The next ``event`` (one already received counts), for waiting on a page load."""
        for i, message in enumerate(self.events):
            if message.get("method") == event:
                return self.events.pop(i)
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == event:
                return message
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the centre of the element."""
        box = self.evaluate(
            f"(function(){{var el=document.querySelector({json.dumps(selector)});"
            "el.scrollIntoView({block:'center'});var r=el.getBoundingClientRect();"
            "return {x:r.left+r.width/2,y:r.top+r.height/2};})()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box["x"],
                y=box["y"],
                button="left" if kind != "mouseMoved" else "none",
                clickCount=1 if kind != "mouseMoved" else 0,
            )

    def screenshot(self, path: Path) -> Path:
        """The whole page (beyond the viewport) as PNG."""
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        out = []
        for m in self.events:
            method, params = m.get("method"), m.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params["exceptionDetails"])[:300])
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                out.append(json.dumps(params.get("args"))[:300])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                out.append(params["entry"].get("text", "")[:300])
        return out

    def requested_urls(self) -> list[str]:
        return [
            m["params"]["request"]["url"]
            for m in self.events
            if m.get("method") == "Network.requestWillBeSent"
        ]
