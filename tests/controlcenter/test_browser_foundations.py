"""The foundations every page stands on, in real Chromium against a real Daphne server:
signing in and out, refusing anonymous state changes, the audit log, live updates."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from playwright.sync_api import expect

from controlcenter.models import AuditEntry
from tests.controlcenter.browser import Browser
from tests.controlcenter.conftest import PASSWORD


def test_a_user_signs_in_and_out(browser: Browser, viewer: User) -> None:
    browser.visit("/audit/")
    expect(browser.page.locator(".account")).to_contain_text("Sign in")
    browser.login("viewer", PASSWORD)
    expect(browser.page.locator(".account .who")).to_have_text("viewer")
    with browser.page.expect_navigation():
        browser.page.click("text=Sign out")
    browser.snap("signed-out")
    expect(browser.page.locator(".account")).to_contain_text("Sign in")


def test_a_wrong_password_gets_a_form_error(browser: Browser, viewer: User) -> None:
    browser.visit("/login/")
    browser.page.fill("input[name=username]", "viewer")
    browser.page.fill("input[name=password]", "not the password")
    with browser.page.expect_navigation():
        browser.page.click("button[type=submit]")
    browser.snap("wrong-password")
    expect(browser.page.locator(".form-errors")).to_contain_text("enter a correct username")


def test_an_anonymous_user_is_sent_to_sign_in_and_nothing_changes(
    browser: Browser, operator: User
) -> None:
    browser.visit("/probe/")
    with browser.page.expect_navigation():
        browser.page.click("#touch")
    browser.snap("refused")
    assert re.search(r"/login/\?next=/probe/$", browser.page.url), browser.page.url
    assert not AuditEntry.objects.exists()

    # Signing in from there returns to the page the form was on; now the change goes through.
    browser.page.fill("input[name=username]", "operator")
    browser.page.fill("input[name=password]", PASSWORD)
    with browser.page.expect_navigation():
        browser.page.click("button[type=submit]")
    assert browser.page.url.endswith("/probe/")
    with browser.page.expect_navigation():
        browser.page.click("#touch")
    browser.snap("touched")
    expect(browser.page.locator(".message-success")).to_contain_text("Touched topic orders")


def test_a_user_without_the_permission_gets_a_403_page(browser: Browser, viewer: User) -> None:
    browser.login("viewer", PASSWORD)
    browser.visit("/probe/")
    with browser.page.expect_navigation() as navigation:
        browser.page.click("#touch")
    browser.snap("forbidden")
    assert navigation.value.status == 403
    expect(browser.page.locator("main")).to_contain_text("Create and delete topics")
    assert not AuditEntry.objects.exists()


def test_the_audit_page_lists_what_was_done(browser: Browser, operator: User) -> None:
    browser.login("operator", PASSWORD)
    browser.visit("/probe/")
    with browser.page.expect_navigation():
        browser.page.click("#touch")
    browser.visit("/audit/")
    row = browser.page.locator("#audit-entries tbody tr").first
    expect(row).to_contain_text("operator")
    expect(row).to_contain_text("probe.touch")
    expect(row).to_contain_text("topic orders")
    expect(row.locator(".badge")).to_have_text("ok")
    expect(browser.page.locator(".main-nav a.active")).to_have_text("Audit log")
    browser.page.emulate_media(color_scheme="dark")
    browser.snap("audit-dark")


def test_the_live_indicator_connects_applies_fragments_and_reconnects(browser: Browser) -> None:
    page = browser.page
    browser.visit("/probe/")
    indicator = page.locator("#live-indicator")
    expect(indicator).to_have_attribute("data-state", "live")
    # The server's first fragment names the topics as live.js encoded them (a comma inside
    # one topic survives).
    probe = page.locator("#live-probe")
    expect(probe).to_have_text(re.compile(r"^connection \d+: probe \| topic:a,b$"))
    first = int(re.findall(r"\d+", probe.inner_text())[0])
    browser.snap("live")

    push = browser.context.request.post
    push(f"{browser.server.url}/probe/push/item/?text=first")
    push(f"{browser.server.url}/probe/push/item/?text=second")
    expect(page.locator("#probe-list li")).to_have_text(["first", "second"])

    push(f"{browser.server.url}/probe/push/banner/?text=Cluster unreachable: no broker answers")
    expect(page.locator("#banner-cluster")).to_have_text("Cluster unreachable: no broker answers")
    browser.snap("banner")
    page.emulate_media(color_scheme="dark")
    browser.snap("banner-dark")
    push(f"{browser.server.url}/probe/push/banner/")
    expect(page.locator("#banner-cluster")).to_have_count(0)

    # The server drops the socket: the page says so, comes back by itself, and the new
    # connection re-sends the current fragment.
    page.evaluate("""() => { window.__states = [];
        new MutationObserver(() => window.__states.push(
            document.getElementById('live-indicator').dataset.state)).observe(
            document.getElementById('live-indicator'), {attributes: true}); }""")
    push(f"{browser.server.url}/probe/push/drop/")
    expect(probe).to_have_text(re.compile(rf"^connection {first + 1}: "))
    expect(indicator).to_have_attribute("data-state", "live")
    assert "reconnecting" in page.evaluate("window.__states")
