"""Drives a memlens HTML report in headless Chromium (Selenium, Debian's
chromium-driver) as a user would, and prints what it saw as JSON for the
Rust test to check: load time, console errors, a table's order before and
after clicking its headings, and the rows a filter leaves.

Usage: python3 report_page.py REPORT.html TABLE_SECTION_ID COLUMN FILTER
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

page, section, column, wanted = sys.argv[1:5]

options = webdriver.ChromeOptions()
for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
    options.add_argument(flag)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    started = time.monotonic()
    driver.get("file://" + page)
    ready = driver.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready")
    load_s = time.monotonic() - started
    # The first table after the section's heading.
    table = driver.find_element(By.XPATH, f"//h2[@id='{section}']/following::table[1]")
    headings = table.find_elements(By.CSS_SELECTOR, "thead th")
    names = [h.text for h in headings]
    col = names.index(column)

    def visible_rows():
        rows = []
        for body in table.find_elements(By.CSS_SELECTOR, "tbody"):
            if body.is_displayed():
                cells = body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")
                rows.append([c.text for c in cells])
        return rows

    def values():
        return [
            body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")[col].get_attribute("data-v")
            for body in table.find_elements(By.CSS_SELECTOR, "tbody")
        ]

    before = visible_rows()
    headings[col].click()
    first_click = values()
    first_sort = headings[col].get_attribute("aria-sort")
    headings[col].click()
    second_click = values()
    second_sort = headings[col].get_attribute("aria-sort")
    name_col = len(names) - 1
    headings[name_col].click()
    by_name = [r[name_col] for r in visible_rows()]
    box = driver.find_element(By.XPATH, f"//h2[@id='{section}']/following::input[@class='filter'][1]")
    box.send_keys(wanted)
    filtered = visible_rows()
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    print(json.dumps({
        "ready": ready,
        "load_s": load_s,
        "columns": names,
        "rows": before,
        "first_click": first_click,
        "first_sort": first_sort,
        "second_click": second_click,
        "second_sort": second_sort,
        "by_name": by_name,
        "filtered": filtered,
        "errors": errors,
    }))
finally:
    driver.quit()
