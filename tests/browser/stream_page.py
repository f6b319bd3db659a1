"""Drives the HTML report of an instrumented program (the STREAM example)
in headless Chromium (Selenium, Debian's chromium-driver) and prints what
it saw as JSON for the Rust test to check: the line the source pane opens
at for all samples, for an object (by the link under the object's row in
the access table), for a region and for a function (by the pane's own
selector), each with its source text and samples, and for the access flame
graph's heaviest "load at" frame (by the link a click on it offers under
the graph); the bandwidth chart's
series, a thread's shown by a click on its legend entry, and its range
after a range is selected on the timeline, and the source pane's sampled
lines then; the console's errors.

Usage: python3 stream_page.py REPORT.html OBJECT REGION FUNCTION
"""
import json
import sys

import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

page, wanted_object, wanted_region, wanted_function = sys.argv[1:5]

driver = chromium.start()
try:
    driver.get("file://" + page)
    ready = driver.find_element(By.CSS_SELECTOR, "body").get_attribute("data-ready")
    whose = Select(driver.find_element(By.ID, "source-of"))
    which_file = Select(driver.find_element(By.ID, "source-file"))

    def shown():
        """The pane's selections and the line it points at."""
        target = driver.find_element(By.CSS_SELECTOR, "#source-view tr.target")
        cells = [c.get_attribute("textContent") for c in target.find_elements(By.TAG_NAME, "td")]
        headings = [
            th.get_attribute("textContent")
            for th in driver.find_elements(By.CSS_SELECTOR, "#source-view thead th")
        ]
        return {
            "of": whose.first_selected_option.text,
            "file": which_file.first_selected_option.text,
            "line": int(target.get_attribute("data-line")),
            "samples": cells[1],
            "code": cells[-1],
            "headings": headings,
            "rows": len(driver.find_elements(By.CSS_SELECTOR, "#source-view tbody tr")),
        }

    seen = {"ready": ready, "all": shown()}

    # The object's row in the access table: a click opens its lines, among
    # them the link to its hottest source line.
    table = driver.find_element(By.XPATH, "//h2[@id='access']/following::table[not(ancestor::details)][1]")
    row = next(
        body
        for body in table.find_elements(By.CSS_SELECTOR, "tbody")
        if body.find_elements(By.CSS_SELECTOR, "tr:first-child > td")[-1].text == wanted_object
    )
    row.find_element(By.CSS_SELECTOR, "tr:first-child").click()
    link = row.find_element(By.CSS_SELECTOR, "a.to-source")
    seen["link"] = link.text
    link.click()
    seen["object"] = shown()

    for kind, wanted in (("region", wanted_region), ("function", wanted_function)):
        choice = next(o.text for o in whose.options if o.text.startswith(f"{kind}: {wanted} ("))
        whose.select_by_visible_text(choice)
        seen[kind] = shown()

    # The access flame graph: a click on its heaviest "load at" frame
    # offers its line under the graph; the link opens the pane there.
    figure = driver.find_element(By.XPATH, "//h2[@id='access']/following::div[@class='flame-view'][1]/figure")
    seen["frame"] = driver.execute_script(
        "var best = null, most = -1;"
        "arguments[0].querySelectorAll('.flame-graph div').forEach(function (d) {"
        "  var t = d.title;"
        "  var n = Number((/\\(([\\d,]+) /.exec(t.slice(t.lastIndexOf(' ('))) || [0, '0'])[1].replace(/,/g, ''));"
        "  if (d.textContent.indexOf('load at ') === 0 && n > most) { most = n; best = d; }"
        "});"
        "var title = best.title; best.click();"
        "return title;",
        figure,
    )
    offer = figure.find_element(By.CSS_SELECTOR, ".frame-source")
    seen["frame_offer"] = offer.text
    offer.find_element(By.TAG_NAME, "a").click()
    seen["frame_line"] = shown()

    # The bandwidth chart: its legend, a thread's series shown by a click,
    # and the range it follows when the timeline's is set.
    legend = driver.find_elements(By.CSS_SELECTOR, "#bandwidth-chart .u-legend .u-series")
    seen["bandwidth_series"] = [
        [e.find_element(By.CSS_SELECTOR, ".u-label").text, "u-off" not in e.get_attribute("class")]
        for e in legend[1:]
    ]
    thread = next(e for e in legend if e.text.startswith("tid "))
    driver.execute_script("arguments[0].scrollIntoView()", thread)
    thread.find_element(By.CSS_SELECTOR, ".u-label").click()
    seen["thread_shown"] = "u-off" not in thread.get_attribute("class")
    # A range inside the samples' span (the second quarter of it: the
    # timeline spans the whole session, the program only part of it).
    # uPlot applies a new scale after the script that set it (a microtask).
    driver.execute_script(
        "var lo = Infinity, hi = -Infinity;"
        "MEMLENS_SOURCE.files.forEach(function (f) { f.lines.forEach(function (l) {"
        "  lo = Math.min(lo, l[10]); hi = Math.max(hi, l[11]); }); });"
        "window.memlensTimeline.setScale('x', {min: lo + (hi - lo) / 4, max: lo + (hi - lo) / 2});"
    )
    seen["bandwidth_range"] = driver.execute_script(
        "var t = window.memlensTimeline, b = window.memlensBandwidth;"
        "return [t.scales.x.min, t.scales.x.max, b.scales.x.min, b.scales.x.max];"
    )
    # The source pane after that range: the lines sampled in it.
    whose.select_by_index(0)
    seen["range_lines"] = [
        int(tr.get_attribute("data-line"))
        for tr in driver.find_elements(By.CSS_SELECTOR, "#source-view tr.sampled")
    ]
    seen["range_why"] = driver.find_element(By.ID, "source-why").text
    # The access flame graph after it: its slices' length, note and root.
    view = driver.find_element(By.XPATH, "//h2[@id='access']/following::div[@class='flame-view'][1]")
    seen["range_flame"] = driver.execute_script(
        "var v = arguments[0], t = JSON.parse(v.querySelector('script.flame-tree').textContent);"
        "return { seconds: t.slices.seconds, note: v.querySelector('.flame-range').textContent,"
        "  root: v.querySelector('.flame-graph div').title };",
        view,
    )

    seen["errors"] = chromium.errors(driver)
    print(json.dumps(seen))
finally:
    driver.quit()
