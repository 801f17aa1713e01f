"""Headless Chromium from Debian (chromium, chromium-driver) driven by
Selenium, and ``nicbench serve`` in its own process, for the dashboard's
browser tests.  Nothing is downloaded: Selenium is pointed at
/usr/bin/chromium and /usr/bin/chromedriver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def artefacts() -> Path:
    """Where screenshots are kept: $NICBENCH_ARTEFACTS (default
    /tmp/nicbench-artefacts)/dashboard/<time>; printed by the tests."""
    base = Path(os.environ.get("NICBENCH_ARTEFACTS", "/tmp/nicbench-artefacts"))
    d = base / "dashboard" / time.strftime("%Y%m%d-%H%M%S")
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextmanager
def chromium(width: int = 1400, height: int = 1800) -> Iterator[webdriver.Chrome]:
    profile = tempfile.mkdtemp(prefix="nbE-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})     # console errors, CSP violations included
    os.environ.setdefault("SE_OFFLINE", "true")          # Selenium Manager must not try to fetch anything
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        subprocess.run(["rm", "-rf", profile], check=False)


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """What the page said at SEVERE level (errors, refused scripts or styles) since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


@contextmanager
def served(store: Path | str, cache: Path) -> Iterator[str]:
    """``nicbench serve`` on a free port; its base URL."""
    p = subprocess.Popen([sys.executable, "-m", "nicbench.cli.main", "serve", "--store", str(store), "--port", "0",
                          "--cache", str(cache)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "serving" in line, (line, p.stderr.read() if p.poll() is not None and p.stderr else "")
        yield line.split(" on ", 1)[1].strip().rstrip("/")
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
