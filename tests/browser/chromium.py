"""What the browser scripts share: headless Chromium driven through
Selenium and Debian's chromium-driver, its console's errors kept."""
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def start():
    """A headless Chromium 1280 pixels wide that keeps its console's log."""
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def errors(driver):
    """The console's errors since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
