"""report.html in a real browser (headless Chromium through selenium; CI installs Debian's
``chromium`` and ``chromium-driver``), checked by what a user sees: it loads with no console error
and no network request, the downstream table filters to one aggregation and sorts by AUROC, the
figures and the montage gallery render, a third party's section is there. Screenshots of the top
of the page and of a filtered table go to ``$VALUES_SEG_SCREENSHOTS`` (default: the test's folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from values_seg.storage.run_files import REPORT_HTML

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

OUTSIDE_SECTION = Path(__file__).resolve().parents[2] / "outside_section"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 600  # a hang guard: each wait ends when its state comes, however loaded the machine


@pytest.fixture(scope="module")
def page(stats_run, tmp_path_factory) -> Path:
    """report.html of the synthetic run (with intervals) built by ``values-seg report`` with an
    outside package's report section installed (``tests/outside_section``)."""
    run = shutil.copytree(stats_run, tmp_path_factory.mktemp("page") / "run")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OUTSIDE_SECTION), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "values_seg.cli", "report", str(run)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return run / REPORT_HTML


@pytest.fixture(scope="module")
def browser():
    if not Path(DRIVER).exists():
        pytest.skip("no chromedriver: apt-get install chromium chromium-driver (CI does)")
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    driver.set_script_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get("VALUES_SEG_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _open(driver, page: Path) -> None:
    driver.get(page.as_uri())
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(
        "return document.querySelectorAll('table[id^=table-]').length > 0 && "
        "[...document.querySelectorAll('table[id^=table-]')].every(t => t.classList.contains('dataTable'))"))


def _downstream(driver):
    """The downstream table's container: the table with filter panes."""
    return driver.find_element(By.XPATH, "//div[contains(@class,'dt-container')][.//div[contains(@class,'dtsp-panesContainer')]]")


#: the table itself in a DataTables container (not the tables of its filter panes)
TABLE = ":scope > .dt-layout-table"


def _shown(container) -> pd.DataFrame:
    """The rows the table shows, as the user reads them, under its headers."""
    headers, rows = container.parent.execute_script(
        "const t = arguments[0].querySelector(arguments[1]);"
        "return [[...t.querySelectorAll('.dt-scroll-head thead th')].map(th => th.innerText.trim()),"
        "        [...t.querySelectorAll('.dt-scroll-body tbody tr')]"
        "          .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))];", container, TABLE)
    return pd.DataFrame(rows, columns=headers)


def _all_tasks(driver) -> None:
    """Show every task's columns (the table opens on the first task's)."""
    button = _downstream(driver).find_element(By.XPATH, ".//button[normalize-space()='All tasks']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    WebDriverWait(driver, WAIT_S).until(lambda d: "AUROC ↑" in _shown(_downstream(d)).columns)


def _header(driver, title: str):
    return driver.execute_script(
        "return [...arguments[0].querySelector(arguments[1]).querySelectorAll('.dt-scroll-head thead th')]"
        "  .find(th => th.innerText.trim() === arguments[2]);", _downstream(driver), TABLE, title)


def test_the_page_loads_with_no_error_and_no_network_request(page, browser, screenshots):
    browser.get_log("performance"), browser.get_log("browser")  # start from a clean log
    _open(browser, page)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    requested = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    # the page itself; everything else from inside it (embedded images, the table library's module)
    assert page.as_uri() in requested
    assert all(u == page.as_uri() or u.startswith(("data:", "blob:")) for u in requested), sorted(set(requested))
    # every table became interactive, every section is in the table of contents
    assert browser.execute_script("return document.querySelectorAll('.dt-container').length") >= 5
    toc = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav#toc a")]
    assert toc[0] == "Recommendation" and "Downstream tasks (paper Tables 5–6)" in toc
    assert "Dice overview" in toc  # the outside package's section
    browser.save_screenshot(str(screenshots / "report_top.png"))
    assert (screenshots / "report_top.png").read_bytes()[:4] == b"\x89PNG"


def test_the_page_works_with_the_network_off(page, browser):
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                                  "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        _open(browser, page)
        assert _downstream(browser).find_elements(By.CSS_SELECTOR, "div.dt-scroll-body tbody tr")
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                                      "downloadThroughput": -1, "uploadThroughput": -1})


def test_the_downstream_table_filters_to_one_aggregation(page, browser, screenshots):
    _open(browser, page)
    table = _downstream(browser)
    before = _shown(table)
    assert set(before["AGG"]) == {"Patch", "Thresh"} and len(before) == 24
    pane = table.find_element(By.XPATH, ".//div[contains(@class,'dtsp-searchPane')][.//input[@placeholder='AGG']]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", pane)
    pane.find_element(By.XPATH, ".//tr[.//span[contains(@class,'dtsp-name') and normalize-space()='Patch']]").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: set(_shown(_downstream(d))["AGG"]) == {"Patch"})
    after = _shown(_downstream(browser))
    assert len(after) == 12  # 2 scenarios x 2 models x 3 measures
    # the same methods as the patch rows before, with the same numbers
    key = ["Scenario", "PM", "UM"]
    expected = before[before["AGG"] == "Patch"].set_index(key).sort_index()
    assert after.set_index(key).sort_index().equals(expected)
    browser.execute_script("arguments[0].scrollIntoView()", _downstream(browser))
    browser.save_screenshot(str(screenshots / "report_filtered_table.png"))
    pane = _downstream(browser).find_element(By.XPATH, ".//div[contains(@class,'dtsp-searchPane')][.//input[@placeholder='AGG']]")
    pane.find_element(By.XPATH, ".//tr[.//span[contains(@class,'dtsp-name') and normalize-space()='Patch']]").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: len(_shown(_downstream(d))) == 24)  # the filter cleared


def _auroc(table) -> list[float]:
    shown = _shown(table)
    return [float(v.split()[0]) for v in shown["AUROC ↑"] if v]


def test_sorting_by_auroc_orders_the_rows(page, browser):
    _open(browser, page)
    _all_tasks(browser)
    table = _downstream(browser)
    unsorted = _auroc(table)
    assert len(unsorted) == 12 and unsorted != sorted(unsorted)  # toy_3b's rows; toy_1 has no OoD data
    header = _header(browser, "AUROC ↑")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", header)
    header.click()  # higher is better: the best first
    WebDriverWait(browser, WAIT_S).until(lambda d: _auroc(_downstream(d)) == sorted(unsorted, reverse=True))
    _header(browser, "AUROC ↑").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _auroc(_downstream(d)) == sorted(unsorted))
    _header(browser, "ACE (merged bins) i.i.d. ↓").click()  # lower is better: the best first
    WebDriverWait(browser, WAIT_S).until(lambda d: (lambda v: v == sorted(v))(
        [float(x) for x in _shown(_downstream(d))["ACE (merged bins) i.i.d. ↓"] if x]))


def test_figures_and_the_montage_gallery_render(page, browser):
    _open(browser, page)
    sizes = browser.execute_script(
        "return [...document.querySelectorAll('img.figure')].map(i => [i.alt, i.naturalWidth, i.complete])")
    assert sizes and all(width > 0 and complete for _, width, complete in sizes), sizes
    alts = [alt for alt, _, _ in sizes]
    assert "Dice overview" in alts  # the outside section's figure
    gallery = browser.execute_script(
        "return [...document.querySelectorAll('.gallery img.figure')].map(i => i.naturalWidth)")
    assert len(gallery) == 1 and gallery[0] > 0
    # a click shows a figure at full size, another click puts it back
    img = browser.find_element(By.CSS_SELECTOR, ".gallery img.figure")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
    img.click()
    assert "zoom" in img.get_attribute("class")
    img.click()
    assert "zoom" not in img.get_attribute("class")


def test_a_task_button_shows_that_task_s_columns_alone(page, browser):
    _open(browser, page)
    labels = ["Scenario", "PM", "UM", "UT", "AGG"]
    first = list(_shown(_downstream(browser)).columns)
    assert first[:5] == labels and "Dice i.i.d. ↑" in first and "AUROC ↑" not in first  # the first task's
    _all_tasks(browser)
    every = list(_shown(_downstream(browser)).columns)
    assert every[:5] == labels and "AUROC ↑" in every and "Dice i.i.d. ↑" in every
    button = _downstream(browser).find_element(By.XPATH, ".//button[normalize-space()='OoD-D']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "Dice i.i.d. ↑" not in _shown(_downstream(d)).columns)
    assert list(_shown(_downstream(browser)).columns) == labels + ["AUROC ↑"]  # its one table metric
    _downstream(browser).find_element(By.XPATH, ".//button[normalize-space()='All tasks']").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: list(_shown(_downstream(d)).columns) == every)


def test_at_1280_by_800_nothing_overflows_the_bars_have_an_axis_and_a_montage_enlarges(page, browser, screenshots):
    """At a 1280 × 800 window: the downstream table (its first task) fits its container and the page
    does not scroll sideways, every filter pane shows all its values, each metric header shows the
    range its bars span (every value inside), a click enlarges a gallery montage to the window, and
    no gallery caption repeats."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        _open(browser, page)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1280
        table = _downstream(browser)
        widths = browser.execute_script(
            "const c = arguments[0], t = c.querySelector('.dt-scroll-body table');"
            "return [t.getBoundingClientRect().width, c.getBoundingClientRect().width, c.getBoundingClientRect().right];",
            table)
        assert widths[0] <= widths[1] and widths[2] <= 1280, widths
        panes = browser.execute_script(
            "return [...arguments[0].querySelectorAll('.dtsp-searchPane .dt-scroll-body')]"
            "  .map(b => [b.scrollHeight, b.clientHeight])", table)
        assert panes and all(scroll <= client + 1 for scroll, client in panes), panes
        axes = browser.execute_script(
            "return [...arguments[0].querySelectorAll('.dt-scroll-head th[data-lo]')]"
            "  .map(th => [th.innerText.trim(), Number(th.dataset.lo), Number(th.dataset.hi),"
            "              getComputedStyle(th, '::after').content])", table)
        shown = _shown(table)
        assert axes and {a[0] for a in axes} == set(shown.columns[5:]), axes
        for title, lo, hi, content in axes:
            values = [float(v.split()[0]) for v in shown[title] if v]
            assert values and lo <= min(values) and max(values) <= hi, (title, lo, hi)
            assert f"{lo:.2f}" in content and f"{hi:.2f}" in content  # drawn under the header
        browser.execute_script("arguments[0].scrollIntoView()", table)
        browser.save_screenshot(str(screenshots / "report_table_1280x800.png"))
        captions = browser.execute_script("return [...document.querySelectorAll('.gallery .card p')].map(p => p.innerText)")
        assert captions and len(captions) == len(set(captions)), captions
        img = browser.find_element(By.CSS_SELECTOR, ".gallery img.figure")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", img)
        small = img.rect["width"]
        img.click()
        big = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height]", img)
        assert big[0] >= 0.9 * 1280 and big[1] >= 0.9 * 800 and big[0] > 2 * small, (small, big)
        browser.save_screenshot(str(screenshots / "report_gallery_enlarged_1280x800.png"))
        img.click()
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
