"""Following a click to the page it leads to, in a way every Chromium answers the same."""

from __future__ import annotations


def click_through(browser, element, timeout: float = 20.0) -> None:
    """Click ``element`` and wait until the page it was on is replaced by the answer.

    Selenium's ``staleness_of`` asks about the clicked element until it is gone; while the
    old document is being torn down, Chromium 156 may answer with an inspector error ("Node
    with given id does not belong to the document") instead of a stale-element one, and
    ``staleness_of`` lets that through as a failure. A mark set on the old page's window is
    gone once the new document has loaded, whatever the browser says meanwhile, so the wait
    asks for that and retries through any driver error.
    """
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.wait import WebDriverWait

    browser.execute_script("window.mcacheLeaving = true")
    element.click()
    WebDriverWait(browser, timeout, ignored_exceptions=(WebDriverException,)).until(
        lambda driver: driver.execute_script(
            "return document.readyState === 'complete' && !window.mcacheLeaving"
        )
    )
