"""`asr-pipeline serve` in a real browser: headless Chromium opens the page on 127.0.0.1, uploads a WAV and reads
the transcript back (the same text `transcribe` prints for that file), takes a screenshot, and sees a clear
message for a file that is not audio, one that is too long and one over the upload cap, while the server keeps
serving."""

from __future__ import annotations

import queue
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import make_wav
from tests.factories import untrained_run

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (.ci/setup.sh)",
)
CLI = str(Path(sys.executable).parent / "asr-pipeline")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The server of an untrained tiny run, up (its "Running on" line read), and the run's folder."""
    root = tmp_path_factory.mktemp("serve")
    run_dir = untrained_run(root)
    port = free_port()
    server = subprocess.Popen(
        [CLI, "serve", "--run-dir", str(run_dir), "--port", str(port), "--max-duration-sec", "5", "--max-upload-mb", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
    seen = []
    while not any("Running on local URL" in line for line in seen):
        seen.append(lines.get(timeout=180))  # raises queue.Empty: the server never came up
    assert not any("public" in line and "gradio.live" in line for line in seen)  # no share link
    yield root, run_dir, f"http://127.0.0.1:{port}/", server
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def upload_and_transcribe(browser, url: str, audio: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    wait = WebDriverWait(browser, 120)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#audio input[type=file]"))
    browser.find_element(By.CSS_SELECTOR, "#audio input[type=file]").send_keys(str(audio))
    # The upload is done when the component links the file on the server.
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#audio a[data-testid='download-link']"))
    browser.find_element(By.CSS_SELECTOR, "#transcribe").click()


def test_an_uploaded_wav_is_transcribed_as_the_command_line_transcribes_it(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, run_dir, url, _ = served
    audio = tmp_path / "tone.wav"
    audio.write_bytes(make_wav(seconds=2.0, freq=300.0))
    expected = subprocess.run(
        [CLI, "transcribe", str(audio), "--run-dir", str(run_dir)], capture_output=True, text=True, check=True
    ).stdout.strip()

    upload_and_transcribe(browser, url, audio)
    WebDriverWait(browser, 120).until(
        lambda d: "s of audio" in d.find_element(By.CSS_SELECTOR, "#timing").text
    )

    assert browser.find_element(By.CSS_SELECTOR, "#transcript textarea").get_attribute("value") == expected
    assert "2.0 s of audio in" in browser.find_element(By.CSS_SELECTOR, "#timing").text
    browser.save_screenshot(str(tmp_path / "serve.png"))
    assert (tmp_path / "serve.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.wav", b"RIFF this is not audio" * 8, "This file cannot be transcribed"),
        ("long.wav", make_wav(seconds=8.0, sample_rate=16000), "longer than the 5 s allowed"),
    ],
)
def test_a_bad_upload_is_a_message_on_the_page_and_the_server_keeps_serving(
    served, browser, tmp_path, name, content, message
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    *_, url, server = served
    (tmp_path / name).write_bytes(content)

    upload_and_transcribe(browser, url, tmp_path / name)

    WebDriverWait(browser, 120).until(lambda d: message in d.page_source)
    assert server.poll() is None, "the server is still running"
    browser.get(url)  # and still answers
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#transcribe"))


def test_an_upload_over_the_size_cap_is_refused_before_it_reaches_the_model(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    *_, url, server = served
    big = tmp_path / "big.wav"
    big.write_bytes(make_wav(seconds=20.0, sample_rate=16000))  # 640 KB > --max-upload-mb 0.5
    browser.get(url)
    WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#audio input[type=file]"))

    browser.find_element(By.CSS_SELECTOR, "#audio input[type=file]").send_keys(str(big))

    WebDriverWait(browser, 60).until(lambda d: "exceed the maximum allowed size" in d.page_source)
    assert not browser.find_elements(By.CSS_SELECTOR, "#audio a[data-testid='download-link']")
    assert server.poll() is None
