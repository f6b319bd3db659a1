"""Drives a job's HTML report in headless Chromium (Selenium, Debian's
chromium-driver) and prints what it saw as JSON for the Rust test to check:
the objects across ranks sorted by a click on "most", the rank selector's
choices and the "most at rank" links, and the page a rank's choice opens
(its objects by peak, its timeline), with the console's errors of both.

Usage: python3 job_page.py JOB.html RANK
"""
import json
import sys

import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

page, rank = sys.argv[1:3]

driver = chromium.start()


try:
    driver.get("file://" + page)
    seen = {"ready": driver.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready")}
    table = driver.find_element(By.XPATH, "//h2[@id='rank-objects']/following::table[not(ancestor::details)][1]")
    names = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    most = names.index("most")
    table.find_elements(By.CSS_SELECTOR, "thead th")[most].click()
    seen["most_sorted"] = [
        body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")[most].get_attribute("data-v")
        for body in table.find_elements(By.CSS_SELECTOR, "tbody")
    ]
    seen["rank_links"] = [
        a.get_attribute("href") for a in table.find_elements(By.CSS_SELECTOR, "a.rank-page")
    ]
    pick = Select(driver.find_element(By.ID, "rank-pick"))
    seen["choices"] = [o.text for o in pick.options]
    seen["errors"] = chromium.errors(driver)
    pick.select_by_visible_text(next(o.text for o in pick.options if o.text.startswith(f"rank {rank} ")))
    WebDriverWait(driver, 10).until(
        lambda d: d.current_url.endswith(f"/rank-{rank}.html")
        and d.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready") == "yes"
    )
    seen["opened"] = driver.current_url
    objects = driver.find_element(By.XPATH, "//h2[@id='objects']/following::table[not(ancestor::details)][1]")
    seen["rank_objects"] = [
        [c.text for c in body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")]
        for body in objects.find_elements(By.CSS_SELECTOR, "tbody")
    ]
    seen["rank_timeline"] = len(driver.find_elements(By.CSS_SELECTOR, "#timeline-chart canvas"))
    seen["rank_errors"] = chromium.errors(driver)
    print(json.dumps(seen))
finally:
    driver.quit()
