"""Drives a memlens HTML report in headless Chromium (Selenium, Debian's
chromium-driver) as a user would, and prints what it saw as JSON for the
Rust test to check: load time, console errors, a table's order before and
after clicking its headings, the rows a filter leaves, an object's call
stack shown by a click on its row, the rows left after a drag across the
timeline (from the end of the region "mapped") selects a time range (and
the counters' charts follow it, and the flame graphs weigh what came in
it), the counters' chart data, then, the range undone by a double-click,
the frames a search highlights in the allocations' flame graph, its
caller/callee view of the function searched for, and the flame graph
weighed by leaked bytes once that measure is chosen.

Usage: python3 report_page.py REPORT.html TABLE_SECTION_ID COLUMN FILTER
"""
import json
import sys
import time

import chromium
from selenium import webdriver
from selenium.webdriver.common.by import By

page, section, column, wanted = sys.argv[1:5]

driver = chromium.start()
try:
    started = time.monotonic()
    driver.get("file://" + page)
    ready = driver.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready")
    load_s = time.monotonic() - started
    # The first table after the section's heading.
    table = driver.find_element(By.XPATH, f"//h2[@id='{section}']/following::table[not(ancestor::details)][1]")
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
    # A click on an object's row shows its call stack under it.
    opens = next(tr for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr.opens") if tr.is_displayed())
    hidden_stack = [tr.is_displayed() for tr in opens.find_elements(By.XPATH, "../tr[@class='more']")]
    opens.click()
    stack = [
        tr.text for tr in opens.find_elements(By.XPATH, "../tr[@class='more']") if tr.is_displayed()
    ]
    opens.click()
    box.clear()
    box.send_keys(" ")
    box.send_keys("\b")
    # A drag across the timeline from just after the region "mapped" ends
    # (where its mapping is freed) to the run's end selects a time range:
    # the table keeps the objects live in it. The offsets are from the
    # plotting area's centre.
    over = driver.find_element(By.CSS_SELECTOR, "#timeline-chart .u-over")
    width = over.size["width"]
    mapped_end = driver.execute_script(
        "var ends = MEMLENS_TIMELINE.regions.filter(function (r) { return r[0] === 'mapped'; })"
        ".map(function (r) { return r[2]; });"
        "return memlensTimeline.valToPos(Math.max.apply(null, ends), 'x');"
    )
    start = int(mapped_end) + 4
    (
        webdriver.ActionChains(driver)
        .move_to_element_with_offset(over, start - width // 2, 0)
        .click_and_hold()
        .move_by_offset(width - 2 - start, 0)
        .release()
        .perform()
    )
    selected = driver.execute_script(
        "return [memlensTimeline.scales.x.min, memlensTimeline.scales.x.max]"
    )
    # The counters' charts under the timeline: their data, and every
    # chart's range after the drag.
    counters = driver.execute_script("return MEMLENS_COUNTERS")
    counter_titles = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#counter-charts p.counter-title")]
    chart_ranges = driver.execute_script(
        "return window.memlensCharts.map(function (c) { return [c.scales.x.min, c.scales.x.max]; })"
    )
    # Each flame graph's note and root under the range, and the frames of
    # the allocations' (bytes allocated) one.
    flame_views = driver.find_elements(By.XPATH, "//h2[@id='allocated']/following::div[@class='flame-view']")
    range_flames = [
        {
            "note": v.find_element(By.CSS_SELECTOR, ".flame-range").get_attribute("textContent"),
            "root": driver.execute_script(
                "var g = arguments[0].querySelector('.flame-graph div'); return g ? g.title : null", v
            ),
        }
        for v in flame_views
    ]
    range_frames = [
        e.get_attribute("textContent") for e in flame_views[0].find_elements(By.CSS_SELECTOR, ".flame-graph div")
    ]
    # Its caller/callee view under the range: the functions listed.
    range_sandwich = flame_views[0].find_element(By.CSS_SELECTOR, "details.sandwich")
    range_sandwich.find_element(By.TAG_NAME, "summary").click()
    range_functions = [
        r.find_elements(By.TAG_NAME, "td")[-1].text
        for r in range_sandwich.find_elements(By.CSS_SELECTOR, ".sandwich-functions tbody tr")
    ]
    range_sandwich.find_element(By.TAG_NAME, "summary").click()
    in_range = []
    for body in table.find_elements(By.CSS_SELECTOR, "tbody"):
        cells = body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")
        first = float(cells[names.index("first")].get_attribute("data-v"))
        last = float(cells[names.index("last")].get_attribute("data-v"))
        name = cells[name_col].get_attribute("textContent")
        in_range.append({"name": name, "first": first, "last": last, "shown": body.is_displayed()})
    range_note = driver.find_element(By.ID, "timeline-range").text
    regions = driver.execute_script("return MEMLENS_TIMELINE.regions.map(function (r) { return r[0]; })")
    # A double-click on the timeline undoes the range.
    webdriver.ActionChains(driver).double_click(over).perform()
    whole_note = flame_views[0].find_element(By.CSS_SELECTOR, ".flame-range").get_attribute("textContent")
    # The allocations' flame graph: a search highlights the frames whose
    # name holds the text.
    flame = flame_views[0].find_element(By.CSS_SELECTOR, ".flame-graph")
    flame_height = flame.size["height"]
    flame_frames = len(flame.find_elements(By.TAG_NAME, "div"))
    flame_views[0].find_element(By.CSS_SELECTOR, "input.flame-search").send_keys(wanted)
    highlighted = [e.get_attribute("title") for e in flame.find_elements(By.CSS_SELECTOR, "div.match")]
    matched = flame_views[0].find_element(By.CSS_SELECTOR, ".flame-matched").text
    # Its caller/callee view: opened, then the function searched for picked.
    sandwich = driver.find_element(
        By.XPATH, "//h2[@id='allocated']/following::details[@class='sandwich'][1]"
    )
    sandwich.find_element(By.TAG_NAME, "summary").click()
    sandwich.find_element(By.CSS_SELECTOR, "input.sandwich-filter").send_keys(wanted)
    shown_functions = [
        r.find_elements(By.TAG_NAME, "td")[-1].text
        for r in sandwich.find_elements(By.CSS_SELECTOR, ".sandwich-functions tbody tr")
        if r.is_displayed()
    ]
    next(
        r
        for r in sandwich.find_elements(By.CSS_SELECTOR, ".sandwich-functions tbody tr")
        if r.is_displayed()
    ).click()

    def frames(which):
        return [
            e.get_attribute("textContent")
            for e in sandwich.find_elements(By.CSS_SELECTOR, f".sandwich-{which} div")
        ]

    sandwich_seen = {
        "functions": shown_functions,
        "title": sandwich.find_element(By.CSS_SELECTOR, ".sandwich-title").text,
        "callers": frames("callers"),
        "callees": frames("callees"),
    }
    # The flame graph by another measure: leaked bytes.
    choices = driver.find_element(By.XPATH, "//h2[@id='allocated']/following::p[@class='flame-measures'][1]")
    measures = [label.text for label in choices.find_elements(By.TAG_NAME, "label")]
    choices.find_element(By.XPATH, ".//label[contains(., 'leaked')]").click()
    shown_views = [
        v for v in driver.find_elements(By.XPATH, "//h2[@id='allocated']/following::div[@class='flame-view']")
        if v.is_displayed()
    ]
    leaked = shown_views[0].find_element(By.CSS_SELECTOR, ".flame-graph")
    leaked_height = leaked.size["height"]
    leaked_root = leaked.find_element(By.TAG_NAME, "div").get_attribute("title")
    errors = chromium.errors(driver)
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
        "hidden_stack": hidden_stack,
        "stack": stack,
        "selected": selected,
        "in_range": in_range,
        "range_note": range_note,
        "counters": counters,
        "counter_titles": counter_titles,
        "chart_ranges": chart_ranges,
        "regions": regions,
        "range_flames": range_flames,
        "range_frames": range_frames,
        "range_functions": range_functions,
        "whole_note": whole_note,
        "flame_height": flame_height,
        "sandwich": sandwich_seen,
        "flame_frames": flame_frames,
        "measures": measures,
        "shown_views": len(shown_views),
        "leaked_height": leaked_height,
        "leaked_root": leaked_root,
        "highlighted": highlighted,
        "matched": matched,
        "errors": errors,
    }))
finally:
    driver.quit()
