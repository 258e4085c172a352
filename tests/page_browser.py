"""The one-file page (export.py) in a real browser: opened from disk in Debian's chromium driven by Playwright (the
system browser: nothing is downloaded), with every request to the network sent to a dead proxy; each request that
leaves the page and each console error or uncaught exception is kept. The page tests use it, and run as a script it
takes the README's screenshot (and with TINYLM_PAGE_TIMING=1 first prints the time to the first panel and per key):

python export.py ckpt=multirun/leak/DATE out=/tmp/leak.html
python tests/page_browser.py /tmp/leak.html --text "To be, or not to be, that is the question:" --query 17 \
    --out docs/page-leak.png
TINYLM_PAGE_TIMING=1 python tests/page_browser.py /tmp/leak.html --out /tmp/page.png \
    --text "Whether 'tis nobler in the mind to suffer the slings and arrows."
(64 characters: a default-size run's whole context, model.block_size=64; the key typed is its last token)
"""

import argparse
import os
import statistics
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from attention_browser import CHROMIUM, FLAGS, SHOWN, WIDTH, click_query, type_text, wait_for_panels

DEAD_PROXY = "--proxy-server=127.0.0.1:9"  # nothing listens there: a request that got past the CSP fails
IN_PAGE = ("blob:", "data:", "about:")  # what a page made of one file may ask for, besides itself
FIREFOX = "/usr/bin/firefox-esr"
KEYS = "abcdefg"  # the keys timed, each typed as a text's last character


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


# Resolves, once a key is typed in the text box, with the seconds from the key (its event's time) to the first frame
# painted with every panel showing the text: polled at each frame, and read after that frame's paint (a task queued
# from the frame's callback runs once it is painted).
KEY_TO_PAINT = (
    """() => {
  window.keyToPaint = new Promise((resolve) => {
    const shown = """
    + SHOWN
    + """;
    const box = document.getElementById("text");
    box.addEventListener("keydown", (event) => {
      const poll = () => {
        if (!shown()) return requestAnimationFrame(poll);
        setTimeout(() => resolve((performance.now() - event.timeStamp) / 1000));
      };
      requestAnimationFrame(poll);
    }, { once: true });
  });
}"""
)


def time_per_key(page, text: str) -> list[float]:
    """Seconds from each of KEYS typed (the text's last character, a different one each time) to every panel
    painted anew, the text box at the top of the window, the heat maps below it: where a person typing looks."""
    box = page.locator("#text")
    box.evaluate("box => box.scrollIntoView({ block: 'start' })")
    took = []
    for last in KEYS:
        box.fill(text[:-1])
        wait_for_panels(page)
        page.evaluate(KEY_TO_PAINT)
        box.press(last)
        took.append(page.evaluate("() => window.keyToPaint"))
    return took


def print_timing(page, text: str) -> None:
    """The time to the first panel, and per key with every panel open, then with the first alone (the others closed
    and opened again after)."""
    first = time_to_first_panel(page)
    print(f"first panel drawn {first:.3f} s after opening; a key typed as the last of {len(text)} characters, "
          f"to its panels painted, median of {len(KEYS)} keys:")  # fmt: skip
    panels = page.locator(".panel").evaluate_all("panels => panels.map((panel) => panel.dataset.run)")
    print_keys(page, text, f"{len(panels)} panel(s)")
    if len(panels) > 1:
        for run in panels[1:]:
            page.locator(f'.run[data-run="{run}"] input').uncheck()
        print_keys(page, text, f"{panels[0]} alone")
        for run in panels[1:]:
            page.locator(f'.run[data-run="{run}"] input').check()
        wait_for_panels(page)


def print_keys(page, text: str, which: str) -> None:
    keys = time_per_key(page, text)
    each = ", ".join(f"{t:.3f}" for t in keys)
    print(f"  {which}: {statistics.median(keys):.3f} s ({each})")


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
