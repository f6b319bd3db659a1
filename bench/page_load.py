"""Opens a memlens HTML report in headless Chromium (tests/browser's
driver) three times and prints each load's seconds, until the page's
script has run to its end (body data-ready), and the console's errors.

Usage: python3 bench/page_load.py REPORT.html"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "browser"))
import chromium  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

page = os.path.abspath(sys.argv[1])
driver = chromium.start()
try:
    loads = []
    for _ in range(3):
        started = time.monotonic()
        driver.get("file://" + page)
        ready = driver.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready")
        loads.append(time.monotonic() - started)
        assert ready == "yes", "the page's script did not run to its end"
    print("page load (s): " + " ".join(f"{s:.2f}" for s in loads))
    print(f"console errors: {len(chromium.errors(driver))}")
finally:
    driver.quit()
