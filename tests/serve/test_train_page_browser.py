"""`asr-pipeline serve --train-runs` in headless Chromium: the form starts a fine-tune of a tiny Voxtral folder, the
page shows its log and status live until it finishes; a second, long job is ended by Stop."""

from __future__ import annotations

import os
import queue
import subprocess
import threading

import pytest

from tests.hf_finetune.conftest import save_tiny_voxtral, short_sentences, write_demo_utterances
from tests.serve.conftest import CHROMEDRIVER, CHROMIUM
from tests.serve.test_app import CLI, free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None, reason="needs Debian's chromium and chromium-driver"
    ),
]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_page")
    texts = short_sentences(8)
    data = {"train": write_demo_utterances(root, texts[:6], "train", 1),
            "val": write_demo_utterances(root, texts[6:], "val", 2), "model": save_tiny_voxtral(root / "vox", texts)}  # fmt: skip
    port = free_port()
    server = subprocess.Popen([CLI, "serve", "--train-runs", str(root / "runs"), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
    seen = []
    while not any("Running on local URL" in line for line in seen):
        seen.append(lines.get(timeout=180))
    yield root, data, f"http://127.0.0.1:{port}/"
    server.terminate()
    server.wait(timeout=60)


def fill(browser, element_id: str, value) -> None:
    from selenium.webdriver.common.by import By

    field = browser.find_element(By.CSS_SELECTOR, f"#{element_id} textarea, #{element_id} input")
    field.clear()
    field.send_keys(str(value))


def start_job(browser, url, name, data, **numbers) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#start"))
    for element_id, value in {"name": name, "model": data["model"], "train": data["train"], "val": data["val"],
                              **numbers}.items():  # fmt: skip
        fill(browser, element_id, value)
    browser.find_element(By.CSS_SELECTOR, "#start").click()


def test_a_job_started_from_the_form_finishes_with_its_log_on_the_page(page, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root, data, url = page
    start_job(browser, url, "first", data, max_steps=2, batch=3, rank=2)
    WebDriverWait(browser, 400, poll_frequency=2).until(
        lambda d: "finished" in d.find_element(By.CSS_SELECTOR, "#status").text
    )
    log = browser.find_element(By.CSS_SELECTOR, "#log textarea").get_attribute("value")
    assert '"steps": 2' in log
    assert (root / "runs" / "first" / "export" / "config.json").is_file()
    browser.save_screenshot(str(tmp_path / "train_page.png"))
    assert (tmp_path / "train_page.png").stat().st_size > 10_000


def test_stop_ends_a_running_job(page, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root, data, url = page
    start_job(browser, url, "long", data, epochs=500, batch=1)
    WebDriverWait(browser, 120, poll_frequency=1).until(
        lambda d: "running" in d.find_element(By.CSS_SELECTOR, "#status").text
    )
    browser.find_element(By.CSS_SELECTOR, "#stop").click()
    WebDriverWait(browser, 60, poll_frequency=1).until(
        lambda d: "stopped" in d.find_element(By.CSS_SELECTOR, "#status").text
    )
    assert not (root / "runs" / "long" / "metrics.json").exists()
