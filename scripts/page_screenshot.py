"""Picture of `nmt serve`'s web page for the docs: a server on 127.0.0.1, Debian's headless
Chromium (chromium, chromium-driver) driven by Selenium, two sentences translated, a target word
hovered.

    python scripts/page_screenshot.py -m runs/en-fr -o docs/img/serve-page.png
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = (
    "A little girl in a pink dress is climbing into a wooden playhouse.\n"
    "Two dogs run through the snow."
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "img" / "serve-page.png")
    ap.add_argument("--word", type=int, default=2, help="the target word to hover (from 0)")
    args = ap.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    server = subprocess.Popen(
        [sys.executable, "-m", "nmt_cli", "serve", "-m", args.model, "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = server.stderr.readline()
    if "http://" not in line:
        sys.exit(f"nmt serve did not start: {line}{server.stderr.read()}")
    url = line[line.index("http://") :].split()[0]
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(executable_path=shutil.which("chromedriver")), options=options
    )
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        driver.find_element(By.ID, "source").send_keys(SENTENCES)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap td.cell"))
        word = driver.find_element(By.CSS_SELECTOR, f"#pair-target .word[data-j='{args.word}']")
        ActionChains(driver).move_to_element(word).perform()
        time.sleep(0.3)
        height, chrome = driver.execute_script(
            "return [document.documentElement.scrollHeight,"
            " window.outerHeight - window.innerHeight]"
        )
        driver.set_window_size(1280, height + chrome + 8)
        time.sleep(0.3)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(args.output))
        print(f"wrote {args.output}")
    finally:
        driver.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(60)


if __name__ == "__main__":
    main()
