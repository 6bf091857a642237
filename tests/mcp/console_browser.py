"""Helpers of the console's browser tests: an operators' tokens file, and
headless Chromium (Debian's `chromium` and `chromedriver`) driven by
Selenium, with its screenshots kept in `target/console-screenshots`."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO_ROOT

SHOTS = Path(os.environ.get("CONSOLE_SCREENSHOTS") or REPO_ROOT / "target/console-screenshots")


def operators_file(path: Path, tokens: dict[str, str]) -> Path:
    path.write_text(
        "".join(
            f'[[tokens]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\nprincipal = "{name}"\n'
            for token, name in tokens.items()
        )
    )
    return path


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-extensions",
        "--no-first-run",
        "--window-size=1280,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager download anything
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def wait_for(driver, condition, timeout: float = 15.0, what: str = "the page"):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition, message=f"waiting for {what}")


def shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def log_in(driver, base: str, token: str) -> None:
    """Logs in at the console whose address is `base` (`http://host:port/console`)."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/tools")
    wait_for(driver, lambda d: d.current_url.endswith("/console/login"), what="the login page")
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "login").click()
    # Logged in (on to the tools page), or refused (the error shown).
    wait_for(
        driver,
        lambda d: d.current_url.endswith("/console/tools") or d.find_elements(By.ID, "error"),
        what="the login's answer",
    )


def csp_violations(driver) -> list[str]:
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Refused to" in entry["message"]
    ]
