"""The one-file page (export.py) in a real browser: opened from disk in Debian's chromium driven by Playwright (the
system browser: nothing is downloaded), with every request to the network sent to a dead proxy; each request that
leaves the page and each console error or uncaught exception is kept. The page tests use it, and run as a script it
takes the README's screenshot (and with TINYLM_PAGE_TIMING=1 first prints the time to the first panel and per key):

python export.py ckpt=multirun/leak/DATE out=/tmp/leak.html
python tests/page_browser.py /tmp/leak.html --text "To be, or not to be, that is the question:" --query 17 \
    --out docs/page-leak.png
TINYLM_PAGE_TIMING=1 python tests/page_browser.py /tmp/leak.html --out /tmp/page.png \
    --text "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer"
"""

import argparse
import os
import statistics
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from attention_browser import CHROMIUM, FLAGS, WIDTH, click_query, type_text, wait_for_panels

DEAD_PROXY = "--proxy-server=127.0.0.1:9"  # nothing listens there: a request that got past the CSP fails
IN_PAGE = ("blob:", "data:", "about:")  # what a page made of one file may ask for, besides itself
FIREFOX = "/usr/bin/firefox-esr"
TYPING_PAUSE_S = 0.12  # index.js's TYPING_PAUSE_MS: a redraw waits for the typing to pause this long


@dataclass
class Opened:
    page: object  # Playwright's page
    requests: list[str] = field(default_factory=list)  # every URL asked but the page's own
    errors: list[str] = field(default_factory=list)  # console errors (a CSP violation among them) and exceptions


@contextmanager
def chromium() -> Iterator[object]:
    """Debian's chromium, every request to the network sent to the dead proxy."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, DEAD_PROXY])
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def opened_page(browser, path: Path, height: int = 1000, width: int = WIDTH, address: str = "") -> Iterator[Opened]:
    """The page at `path` opened from disk (file://), or from `address` where a server serves it, in a tab of
    `browser`, once its curves and first panels are drawn."""
    address = address or path.resolve().as_uri()
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        opened = Opened(page)
        outside = lambda url: url != address and not url.startswith(IN_PAGE)  # noqa: E731
        page.on("request", lambda request: outside(request.url) and opened.requests.append(request.url))
        page.on("console", lambda message: message.type == "error" and opened.errors.append(message.text))
        page.on("pageerror", lambda error: opened.errors.append(f"{error.name}: {error.message}"))
        page.goto(address)
        wait_until_drawn(page)
        yield opened
    finally:
        page.close()


def wait_until_drawn(page) -> None:
    """The curves drawn (a canvas in each chart of the open section) and every panel showing the text."""
    page.wait_for_function(
        """() => {
          const charts = [...document.querySelectorAll("#curves details[open] .chart")];
          return charts.length > 0 && charts.every((chart) => chart.querySelector("canvas"));
        }""",
        polling="raf",
    )
    wait_for_panels(page)


def time_to_first_panel(page) -> float:
    """Seconds from the navigation's start to the first panel drawn, as the page's own clock saw them (the page is
    opened afresh)."""
    page.reload()
    page.wait_for_function("() => document.querySelector('.panel:not(.loading)')", polling="raf")
    return page.evaluate("() => performance.now()") / 1000


def time_per_key(page, text: str) -> list[float]:
    """Seconds from each of five keys typed (the text's last character, a different one each time) to every panel
    drawn anew, the typing pause included."""
    box = page.locator("#text")
    took = []
    for last in "abcde":
        box.fill(text[:-1])
        wait_for_panels(page)
        started = page.evaluate("() => performance.now()")
        box.press(last)
        wait_for_panels(page)
        took.append((page.evaluate("() => performance.now()") - started) / 1000)
    return took


def print_timing(page, text: str) -> None:
    first = time_to_first_panel(page)
    keys = time_per_key(page, text)
    panels = page.locator(".panel").count()
    median = statistics.median(keys)
    each = ", ".join(f"{t:.3f}" for t in keys)
    print(f"first panel drawn {first:.3f} s after opening; {panels} panel(s), {len(text)} characters: a key typed "
          f"redrawn in {median:.3f} s median of 5 ({each}), {median - TYPING_PAUSE_S:.3f} s after the typing pause "
          f"of {TYPING_PAUSE_S} s")  # fmt: skip


def firefox_screenshot(path: Path, out: Path, width: int = WIDTH, height: int = 1000) -> subprocess.CompletedProcess:
    """firefox-esr's headless screenshot of the page opened from disk, in a profile of its own with the network
    pointed at the dead proxy (Playwright's Firefox needs its own build, which cannot be installed here)."""
    profile = out.parent / "firefox-profile"
    profile.mkdir(exist_ok=True)
    (profile / "user.js").write_text(
        'user_pref("network.proxy.type", 1);\nuser_pref("network.proxy.http", "127.0.0.1");\n'
        'user_pref("network.proxy.http_port", 9);\nuser_pref("network.proxy.ssl", "127.0.0.1");\n'
        'user_pref("network.proxy.ssl_port", 9);\nuser_pref("network.proxy.share_proxy_settings", true);\n'
    )
    command = [FIREFOX, "--headless", "--no-remote", "--profile", str(profile), "--window-size", f"{width},{height}",
               "--screenshot", str(out), path.resolve().as_uri()]  # fmt: skip
    env = dict(os.environ, MOZ_HEADLESS="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description="A screenshot of an exported page (export.py) opened from disk.")
    parser.add_argument("page", type=Path)
    parser.add_argument("--text", required=True)
    parser.add_argument("--query", type=int, help="the query row each panel keeps (default: the last token)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--height", type=int, default=1500)
    parser.add_argument("--width", type=int, default=WIDTH)
    args = parser.parse_args()
    with chromium() as browser, opened_page(browser, args.page, args.height, args.width) as opened:
        page = opened.page
        if os.environ.get("TINYLM_PAGE_TIMING") == "1":
            print_timing(page, args.text)
        type_text(page, args.text)
        if args.query is not None:
            for run in page.locator(".panel").evaluate_all("panels => panels.map(p => p.dataset.run)"):
                click_query(page, run, args.query)
        page.evaluate("window.scrollTo(0, 0)")
        page.mouse.move(0, 0)
        page.screenshot(path=str(args.out))  # what the window shows: the top of the page, `--height` tall
        assert not opened.requests and not opened.errors, (opened.requests, opened.errors)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
