"""The report as a user sees it: a `snakemake --report` page opened in headless Chromium.

Checks what only a browser can tell: the landing page, as Snakemake's report renders it,
states each session's outcome; every image of the report decodes (its naturalWidth, as the
browser measured it); and the outcome's links open their page in the report's viewer.

    python bench/bench_report_browser.py [REPORT.html]

Without an argument, runs the bundled demo (`sessions/demo`, model-free) in a temporary
working directory, finalizes it and makes its report. Needs Chromium (Debian:
`apt-get install -y chromium`); without it, says so and exits 0.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER_TIMEOUT = 300  # one page load on a loaded 2-core machine, with a wide margin
# Virtual time: Chromium runs the page's timers and loads until this budget is spent, then
# dumps the DOM, so the probe below never races a real clock.
VIRTUAL_MS = 30000

# Appended to a copy of the report: once the app has rendered, write what a user would see
# into the DOM, which --dump-dom prints. Images are decoded from the same data the report's
# viewer shows them from; a link is followed by clicking it.
PROBE = """
<script>
window.addEventListener("load", function () {
  setTimeout(async function () {
    const out = {outcome: [], images: {}, page_images: [], opened: []};
    const blocks = document.querySelectorAll(".autoresearch-outcome");
    blocks.forEach(function (b) {
      // Seen without scrolling: its top inside the window.
      const top = b.getBoundingClientRect().top;
      out.outcome.push([b.innerText, top >= 0 && top < window.innerHeight]);
    });
    const decode = function (src) {
      return new Promise(function (resolve) {
        const img = new Image();
        img.onload = function () { resolve([img.naturalWidth, img.naturalHeight]); };
        img.onerror = function () { resolve([0, 0]); };
        img.src = src;
      });
    };
    for (const [path, entry] of Object.entries(results)) {
      if (entry.mime_type.startsWith("image/")) {
        out.images[path] = await decode(entry.data_uri);
      }
    }
    for (const img of document.images) {
      out.page_images.push([img.src.slice(0, 40), img.complete, img.naturalWidth]);
    }
    const links = [];
    blocks.forEach(function (b) {
      b.querySelectorAll("a").forEach(function (a) { links.push(a); });
    });
    for (const a of links) {
      a.click();
      await new Promise(function (r) { setTimeout(r, 300); });
      const frame = document.querySelector("iframe");
      const path = (a.getAttribute("href").match(/results\\["([^"]+)"\\]/) || [])[1];
      const shown = Boolean(frame && path && results[path] && frame.src === results[path].data_uri);
      out.opened.push([a.textContent, path || null, shown]);
    }
    const pre = document.createElement("pre");
    pre.id = "autoresearch-browser-check";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 2000);
});
</script>
"""
RESULT = re.compile(r'<pre id="autoresearch-browser-check">(.*?)</pre>', re.S)


@dataclass
class BrowserView:
    """What the browser showed of a report."""

    outcome: list[list]  # each outcome block of the landing page: [its text, seen unscrolled]
    images: dict[str, list[int]]  # each image of the report -> [naturalWidth, naturalHeight]
    page_images: list[list]  # the landing page's own <img>: [src start, complete, width]
    opened: list[list]  # each outcome link: [text, the page it names, shown in the viewer]

    def problems(self) -> list[str]:
        found = [] if self.outcome else ["the landing page states no outcome"]
        hidden = [text.splitlines()[0] for text, seen in self.outcome if not seen]
        found += [f"outcome out of view: {first}" for first in hidden]
        found += [f"image does not load: {p}" for p, (w, h) in self.images.items() if not w * h]
        found += [f"landing page image not loaded: {s}" for s, ok, w in self.page_images if not w]
        found += [f"link does not open its page: {t} ({p})" for t, p, ok in self.opened if not ok]
        return found


def browser() -> str | None:
    return next((found for b in BROWSERS if (found := shutil.which(b))), None)


def view(report: Path, chromium: str) -> BrowserView:
    """Open `report` (a single-file `snakemake --report x.html`) in headless Chromium."""
    with tempfile.TemporaryDirectory(prefix="report-browser-") as tmp:
        page = Path(tmp) / "report.html"
        text = report.read_text()
        at = text.rindex("</body>")
        page.write_text(text[:at] + PROBE + text[at:])
        args = [chromium, "--headless", "--disable-gpu", "--no-first-run", "--window-size=1280,800"]
        # Nothing to fetch: no update, sync or background requests (CI's network is closed,
        # and a request that waits for it holds the page's load); a fresh profile each time.
        args += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
        args += ["--user-data-dir=" + str(Path(tmp) / "profile")]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses root without it
        args += [f"--virtual-time-budget={VIRTUAL_MS}", "--dump-dom", page.as_uri()]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=BROWSER_TIMEOUT)
    found = RESULT.search(proc.stdout)
    if found is None:
        raise RuntimeError(
            f"{chromium} rendered no result for {report} (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-2000:]}"
        )
    data = json.loads(html.unescape(found.group(1)))
    return BrowserView(data["outcome"], data["images"], data["page_images"], data["opened"])


def demo_report(workdir: Path) -> Path:
    """The bundled demo, run, finalized and reported in `workdir`."""
    (workdir / "examples").symlink_to(ROOT / "examples")
    # The session's worktrees go to the temporary directory too, and go with it.
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(workdir / "data"))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
    report = workdir / "report.html"
    for args in (
        [*snakemake, "--cores", "1", "sessions/demo/done"],
        [sys.executable, "-m", "autoresearch.cli", "finalize", "demo"],
        [*snakemake, "--cores", "1", "--report", str(report), "sessions/demo/done"],
    ):
        subprocess.run(args, cwd=workdir, env=env, check=True, capture_output=True)
    return report


def main() -> int:
    chromium = browser()
    if chromium is None:
        print("skipped: no Chromium (Debian: apt-get install -y chromium)")
        return 0
    with tempfile.TemporaryDirectory(prefix="report-demo-") as tmp:
        start = time.perf_counter()
        report = Path(sys.argv[1]) if len(sys.argv) > 1 else demo_report(Path(tmp))
        made = time.perf_counter()
        seen = view(report, chromium)
        looked = time.perf_counter()
    for block, _ in seen.outcome:
        print(block.strip(), "\n")
    for path, (width, height) in seen.images.items():
        print(f"image {path}: {width}x{height}")
    for text, path, ok in seen.opened:
        print(f"link {text!r} -> {path}: {'opens' if ok else 'DOES NOT OPEN'}")
    print(f"report made in {made - start:.1f} s, looked at in {looked - made:.1f} s")
    for problem in seen.problems():
        print(f"FAIL: {problem}")
    return 1 if seen.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
