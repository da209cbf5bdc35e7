#!/usr/bin/env python
"""Open a rendered report in headless Chromium, as a reader would, and say what is wrong with it.

    python tools/report_browser.py report/default/index.html --width 1300 \
        --screenshot logs/default/report_1300.png

It loads the page at the given width (1280 px unless told) and reports: console
errors and uncaught exceptions (and resources that failed to load), images not
loaded, tables or figures wider than the page (a table may be wider than its
box, which then scrolls; the box may not), and cells that read nan, None or
NaN or are an index column. Exit status 1 when there is a problem. No package
beyond the standard library: it speaks the DevTools protocol over the pipe that
`chromium --remote-debugging-pipe` opens (file descriptors 3 and 4).

Chromium comes from Debian's packages (`apt-get install chromium`); `make
install-test` installs it where it can (as root).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")

# What the page is asked once it has loaded: every check, measured by the browser itself.
CHECKS_JS = r"""
(() => {
  const width = document.documentElement.clientWidth;
  const out = {width, page_scroll_width: document.documentElement.scrollWidth, images: [], wide: [],
               bad_cells: [], index_headers: [], tables: 0, figures: 0};
  for (const img of document.images) {
    out.figures += 1;
    if (!img.complete || img.naturalWidth === 0) out.images.push(img.getAttribute('src'));
    const r = img.getBoundingClientRect();
    if (r.right > width + 0.5) out.wide.push('figure ' + img.getAttribute('src') + ' ends at ' + r.right);
  }
  for (const table of document.querySelectorAll('table')) {
    out.tables += 1;
    const box = table.closest('.table-wrap') || table;
    const r = box.getBoundingClientRect();
    const name = (table.previousElementSibling && table.previousElementSibling.textContent) ||
                 (box.previousElementSibling && box.previousElementSibling.textContent) || table.id;
    if (r.right > width + 0.5) out.wide.push('table "' + name.trim().slice(0, 80) + '" ends at ' + r.right);
    for (const th of table.querySelectorAll('th')) {
      const text = th.textContent.trim();
      if (text === '' || text === 'index' || text.startsWith('Unnamed') || text === 'level_0')
        out.index_headers.push('"' + name.trim().slice(0, 60) + '": header "' + text + '"');
    }
    for (const td of table.querySelectorAll('td')) {
      const text = td.textContent.trim();
      if (['nan', 'NaN', 'None', 'NaT', '<NA>', 'null', 'undefined'].includes(text))
        out.bad_cells.push('"' + name.trim().slice(0, 60) + '": cell "' + text + '"');
    }
  }
  return JSON.stringify(out);
})()
"""


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class DevTools:
    """The DevTools protocol over Chromium's --remote-debugging-pipe (JSON messages ending in NUL)."""

    def __init__(self, browser: str, width: int, height: int) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # the child reads commands on fd 3 and writes answers to fd 4
            # (moved out of the way first, so that one never overwrites the other)
            reading = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            writing = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self._profile = Path(tempfile.mkdtemp(prefix="lmstudy-chromium-"))
        self.process = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4, to_chrome_r, from_chrome_w),  # fds run before the others close
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event


def inspect(page: Path, width: int = 1280, height: int = 900, screenshot: Path | None = None,
            browser: str | None = None) -> dict:
    """Load `page` at `width` px and return what the checks found (see CHECKS_JS) plus errors."""
    browser = browser or find_browser()
    if browser is None:
        raise FileNotFoundError("no Chromium found: install it with `apt-get install chromium`")
    tools = DevTools(browser, width, height)
    try:
        target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            tools.send(f"{domain}.enable", session=session)
        viewport = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        tools.send("Emulation.setDeviceMetricsOverride", viewport, session=session)
        tools.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        tools.wait_for("Page.loadEventFired", timeout=60)
        found = json.loads(
            tools.send("Runtime.evaluate", {"expression": CHECKS_JS, "returnByValue": True},
                       session=session)["result"]["value"]
        )
        errors = []
        for event in tools.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                entry = params["entry"]
                errors.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
        found["console_errors"] = errors
        if screenshot is not None:
            metrics = tools.send("Page.getLayoutMetrics", session=session)
            full = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = tools.send(
                "Page.captureScreenshot",
                {"format": "png", "captureBeyondViewport": True,
                 "clip": {"x": 0, "y": 0, "width": width, "height": full["height"], "scale": 1}},
                session=session, timeout=60,
            )
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        return found
    finally:
        tools.close()


def problems(found: dict) -> list[str]:
    """What a reader would see wrong, one line each; [] when the page is fine."""
    out = [f"console error: {e}" for e in found["console_errors"]]
    out += [f"image not loaded: {src}" for src in found["images"]]
    if found["page_scroll_width"] > found["width"]:
        out.append(f"the page is {found['page_scroll_width']} px wide at {found['width']} px")
    out += [f"wider than the page: {w}" for w in found["wide"]]
    out += [f"cell that says nothing: {c}" for c in found["bad_cells"]]
    out += [f"index or empty header: {h}" for h in found["index_headers"]]
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("page", type=Path, help="the report's index.html")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--screenshot", type=Path, help="write the whole page as PNG here")
    args = p.parse_args(argv)
    if find_browser() is None:
        print(f"error: no Chromium found (looked for {', '.join(BROWSERS)} on PATH): install it with "
              "`make browser` as root (apt-get install --no-install-recommends chromium).", file=sys.stderr)
        sys.exit(2)
    found = inspect(args.page, args.width, screenshot=args.screenshot)
    listed = problems(found)
    print(f"{args.page}: {found['tables']} tables, {found['figures']} figures at {found['width']} px")
    for line in listed:
        print(f"  {line}")
    if args.screenshot:
        print(f"screenshot: {args.screenshot}")
    sys.exit(1 if listed else 0)


if __name__ == "__main__":
    main()
