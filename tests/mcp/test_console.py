"""The operator console (`serve --console-tokens`), in a real browser.

Headless Chromium (Debian's `chromium`, driven by `chromedriver` through
Selenium) against a real `wasm-agent serve --http`: an operator logs in,
sees the tools with their policies, watches calls made by an MCP client
(the official Python SDK) appear live, searches and exports the audit log,
and reads the health charts. The refusals (no operator credential, an MCP
client's token, a forged Host or Origin, a missing CSRF token) are checked
over plain HTTP. Screenshots go to `target/console-screenshots` (the
book's pictures in docs/images are copies of them).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import BIN, http_session, text_of, wasm
from console_browser import browser, csp_violations, log_in, operators_file, shot, wait_for  # noqa: F401
from servers import tokens_file

pytestmark = pytest.mark.anyio

CLIENT_TOKEN = "alice-client-token"
OPERATOR_TOKEN = "olga-operator-token"


def console_config(tmp_path: Path) -> Path:
    path = tmp_path / "wasm-agent.toml"
    path.write_text(
        f"""
[tools.calc]
component = "{wasm('calculator')}"

[tools.fetch]
component = "{wasm('fetch')}"

[calls.calculate]
cache_ttl = "30s"

[access]
default = "allow"

[[access.rules]]
name = "no fetching for bob"
principals = ["bob"]
tools = ["fetch"]
effect = "deny"
"""
    )
    return path


@pytest.fixture
def console_server(launch_http, tmp_path: Path):
    clients = tokens_file(tmp_path / "clients.toml", {CLIENT_TOKEN: ("alice", "acme")})
    operators = operators_file(tmp_path / "operators.toml", {OPERATOR_TOKEN: "olga"})
    audit = tmp_path / "audit.jsonl"
    server = launch_http(
        "--config", console_config(tmp_path),
        "--tokens", clients,
        "--console-tokens", operators,
        "--audit", audit,
    )
    server.audit = audit  # type: ignore[attr-defined]
    ready = f"http://{server.authority}/readyz"
    for _ in range(300):
        if httpx2.get(ready).status_code == 200:
            break
        time.sleep(0.1)
    return server


def console_url(server, path: str = "") -> str:
    return f"http://{server.authority}/console{path}"


async def test_an_operator_sees_the_tools_watches_calls_live_and_searches_the_audit(console_server, browser):
    from selenium.webdriver.common.by import By

    server = console_server
    driver = browser

    # A wrong token, then an MCP client's token: neither opens the console.
    for token in ("not-a-token", CLIENT_TOKEN):
        log_in(driver, console_url(server), token)
        error = wait_for(driver, lambda d: d.find_elements(By.ID, "error"), what="the login error")
        assert "not an operator's token" in error[0].text
    shot(driver, "login")
    log_in(driver, console_url(server), OPERATOR_TOKEN)
    wait_for(driver, lambda d: d.current_url.endswith("/console/tools"), what="the tools page")
    assert driver.find_element(By.ID, "operator").text == "olga"

    # The tools, with their components and the policy as applied.
    calculate = driver.find_element(By.ID, "tool-calculate")
    assert calculate.find_element(By.CLASS_NAME, "digest").text.startswith("sha256:")
    assert calculate.find_element(By.CLASS_NAME, "source").text.endswith("calculator.wasm")
    assert calculate.find_element(By.CLASS_NAME, "cache").text == "30s per caller"
    assert "local file" in calculate.find_element(By.CLASS_NAME, "signature").text
    policy = {
        row.find_element(By.TAG_NAME, "th").get_attribute("textContent"): row.find_element(
            By.TAG_NAME, "td"
        ).get_attribute("textContent")
        for row in calculate.find_elements(By.CSS_SELECTOR, "table.policy tr")
    }
    assert policy["timeout"] == "10s" and policy["network"] == "none", policy
    fetch_access = driver.find_element(By.CSS_SELECTOR, "#tool-fetch .access").text
    assert 'rule 1 "no fetching for bob": deny principals ["bob"]' in fetch_access
    assert "otherwise: allow" in fetch_access
    shot(driver, "tools")

    # The calls page, live: calls made by an MCP client appear without a reload.
    driver.get(console_url(server, "/calls"))
    wait_for(driver, lambda d: d.find_element(By.ID, "live").text == "live", what="the live stream")
    marker = driver.find_element(By.TAG_NAME, "h1")
    async with http_session(server.url, headers={"Authorization": f"Bearer {CLIENT_TOKEN}"}) as session:
        result = await session.call_tool("calculate", {"expression": "6 * 7"})
        assert text_of(result) == "42"
        denied = await session.call_tool("fetch", {"url": "https://example.com/"})
        assert denied.is_error

    def rows(d):
        found = [r.text for r in d.find_elements(By.CSS_SELECTOR, "#recent tbody tr")]
        return found if len(found) >= 2 else None

    recent = await anyio.to_thread.run_sync(lambda: wait_for(driver, rows, what="two calls on the page"))
    assert marker.is_displayed()  # the same page: no reload happened
    calc_row = next(r for r in recent if "calculate" in r)
    fetch_row = next(r for r in recent if "fetch" in r)
    assert "principal alice, tenant acme" in calc_row and " ok " in f" {calc_row} "
    assert "capability_denied" in fetch_row and "example.com" in fetch_row, fetch_row
    assert "--allow-host" in fetch_row or "network" in fetch_row, fetch_row
    shot(driver, "calls")

    # The audit log: searched, the chain checked, exported.
    driver.get(console_url(server, "/audit?tool=fetch"))
    chain = driver.find_element(By.ID, "chain").text
    assert chain.startswith("The chain holds"), chain
    records = driver.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert records and all("fetch" in r.text and "capability_denied" in r.text for r in records)
    assert driver.find_element(By.ID, "matches").text == "1 record matches."
    shot(driver, "audit")
    cookies = {c["name"]: c["value"] for c in driver.get_cookies()}
    exported = httpx2.get(console_url(server, "/audit/export?tool=fetch"), cookies=cookies)
    assert exported.status_code == 200
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert [r["tool"] for r in lines] == ["fetch"] and lines[0]["principal"] == "alice"
    on_disk = [json.loads(line) for line in server.audit.read_text().splitlines()]
    assert lines[0] in on_disk  # exactly as written

    # Health: the hour's charts count the calls.
    driver.get(console_url(server, "/health"))
    assert int(driver.find_element(By.ID, "calls-total").text) >= 2
    assert int(driver.find_element(By.ID, "denials-total").text) >= 1
    assert driver.find_elements(By.CSS_SELECTOR, "svg#chart-calls rect")
    stores = driver.find_element(By.ID, "stores").text
    assert "answers" in stores and "result cache (memory" in stores, stores
    shot(driver, "health")

    # A phone's width: nothing runs off the side.
    driver.set_window_size(390, 844)
    for page in ("/tools", "/calls", "/audit", "/health"):
        driver.get(console_url(server, page))
        overflow = driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{page} is {overflow}px wider than a phone"
    driver.get(console_url(server, "/calls"))
    shot(driver, "calls-phone")

    # No page needed anything the policy forbids (inline script or style).
    assert csp_violations(driver) == []

    # Logging out ends the login.
    driver.get(console_url(server, "/tools"))
    driver.find_element(By.CSS_SELECTOR, "form.who button").click()
    wait_for(driver, lambda d: d.current_url.endswith("/console/login"), what="the login page")
    driver.get(console_url(server, "/calls"))
    assert driver.current_url.endswith("/console/login")


async def test_the_console_refuses_without_an_operator_login_a_forged_host_or_a_csrf_token(console_server):
    server = console_server
    base = console_url(server)
    own = {"Origin": f"http://{server.authority}"}
    with httpx2.Client(follow_redirects=False, timeout=10) as http:
        # Nobody logged in: sent to the login page; forms refused.
        response = http.get(f"{base}/tools")
        assert response.status_code == 303 and response.headers["location"] == "/console/login"
        assert http.post(f"{base}/logout", data={"csrf": "x"}, headers=own).status_code == 401
        # An MCP client's bearer token does not open it.
        response = http.get(f"{base}/tools", headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
        assert response.status_code == 303

        # The login form must come from this browser's login page.
        page = http.get(f"{base}/login")
        assert page.status_code == 200
        assert "'unsafe-inline'" not in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY"
        form = page.cookies["wa_console_form"]
        response = http.post(f"{base}/login", data={"form": "other", "token": OPERATOR_TOKEN}, headers=own)
        assert response.status_code == 403 and "CSRF" in response.text
        response = http.post(f"{base}/login", data={"form": form, "token": CLIENT_TOKEN}, headers=own)
        assert response.status_code == 401 and "is not an operator" in response.text
        page = http.get(f"{base}/login")
        nonce = page.cookies["wa_console_form"]
        # A page of another port of this host (the same site) may not post the form.
        other_port = {"Origin": "http://127.0.0.1:1"}
        response = http.post(f"{base}/login", data={"form": nonce, "token": OPERATOR_TOKEN}, headers=other_port)
        assert response.status_code == 403 and "Origin" in response.text
        response = http.post(f"{base}/login", data={"form": nonce, "token": OPERATOR_TOKEN})
        assert response.status_code == 403  # no Origin at all
        # A nonce of one's own making (a cookie planted by a sibling page) is refused.
        http.cookies.set("wa_console_form", "planted", path="/console")
        response = http.post(f"{base}/login", data={"form": "planted", "token": OPERATOR_TOKEN}, headers=own)
        assert response.status_code == 403 and "CSRF" in response.text
        http.cookies.set("wa_console_form", nonce, path="/console")
        response = http.post(
            f"{base}/login",
            data={"form": nonce, "token": OPERATOR_TOKEN},
            headers=own,
        )
        assert response.status_code == 303, response.text
        login = response.cookies["wa_console"]
        set_cookie = response.headers["set-cookie"].lower()
        assert "httponly" in set_cookie and "samesite=strict" in set_cookie

        assert http.get(f"{base}/tools").status_code == 200
        # Requests another site's page makes (an image, a frame) are refused.
        response = http.get(f"{base}/audit/export", headers={"Sec-Fetch-Site": "same-site"})
        assert response.status_code == 403 and "Sec-Fetch-Site" in response.text
        assert http.get(f"{base}/audit?who={'a' * 300}").status_code == 400
        # A forged Host (DNS rebinding) and a foreign Origin are refused before the console.
        response = http.get(f"{base}/tools", headers={"Host": "evil.example"})
        assert response.status_code == 403 and "Host" in response.text
        response = http.post(f"{base}/logout", headers={"Origin": "http://evil.example"}, data={})
        assert response.status_code == 403 and "Origin" in response.text
        # Forms without the login's CSRF token are refused, and change nothing.
        assert http.post(f"{base}/logout", data={}, headers=own).status_code == 403
        assert http.post(f"{base}/logout", data={"csrf": "0" * 32}, headers=own).status_code == 403
        assert http.get(f"{base}/tools").status_code == 200
        # A login cookie changed anywhere is no login.
        forged = login[:-3] + ("AAA" if not login.endswith("AAA") else "BBB")
        http.cookies.set("wa_console", forged, path="/console")
        assert http.get(f"{base}/tools").status_code == 303
        # No page carries inline script or style.
        http.cookies.set("wa_console", login, path="/console")
        for page in ("/tools", "/calls", "/audit", "/health"):
            html = http.get(f"{base}{page}").text
            assert "<script>" not in html and " style=" not in html and " onclick" not in html, page
        # Logged out, the login is over on the server too: its cookie,
        # kept and sent again, opens nothing.
        csrf = http.get(f"{base}/tools").text.split('name="csrf" value="')[1].split('"')[0]
        assert http.post(f"{base}/logout", data={"csrf": csrf}, headers=own).status_code == 303
        http.cookies.set("wa_console", login, path="/console")
        assert http.get(f"{base}/tools").status_code == 303
        assert http.post(f"{base}/logout", data={"csrf": csrf}, headers=own).status_code == 401


def test_operators_need_tokens_of_their_own(tmp_path: Path):
    clients = tokens_file(tmp_path / "clients.toml", {CLIENT_TOKEN: ("alice", "acme")})
    operators = operators_file(tmp_path / "operators.toml", {CLIENT_TOKEN: "olga"})
    result = subprocess.run(
        [str(BIN), "serve", "--http", "127.0.0.1:0", "--tokens", str(clients),
         "--console-tokens", str(operators), "--tools", str(wasm("calculator"))],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert "also an MCP client's" in result.stderr and "operators.toml" in result.stderr
    assert "panicked" not in result.stderr
    result = subprocess.run(
        [str(BIN), "serve", "--stdio", "--console-tokens", str(operators), "--tools", str(wasm("calculator"))],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0 and "--http or --metrics-addr" in result.stderr
