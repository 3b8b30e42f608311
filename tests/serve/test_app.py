"""`asr-pipeline serve` in a real browser: headless Chromium opens the page on 127.0.0.1, uploads a WAV and reads
the transcript back (the same text `transcribe` prints for that file), takes a screenshot, and sees a clear
message for a file that is not audio, one that is too long, a playlist naming a file of the server, a tiny
file that would decode to hundreds of MB (without the server's memory growing) and one over the upload cap,
while the server keeps serving. No upload stays in the server's upload folder once it is answered, and the
folder goes when the server stops."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.conftest import make_wav
from tests.factories import untrained_run
from tests.serve.conftest import CHROMEDRIVER, CHROMIUM

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
    (root / "gradio").mkdir()  # the server makes its own upload folder in here
    server = subprocess.Popen(
        [CLI, "serve", "--run-dir", str(run_dir), "--port", str(port),
         "--max-duration-sec", "30", "--max-upload-mb", "0.5", "--max-decoded-mb", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "GRADIO_TEMP_DIR": str(root / "gradio")},
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

    root, run_dir, url, _ = served
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
    assert uploads_left(root) == [], "deleted once transcribed"
    browser.find_element(By.CSS_SELECTOR, "#transcribe").click()  # again, on the deleted upload
    WebDriverWait(browser, 60).until(lambda d: "upload it again" in d.page_source)
    browser.save_screenshot(str(tmp_path / "serve.png"))
    assert (tmp_path / "serve.png").stat().st_size > 10_000


def uploads_left(root: Path) -> list[Path]:
    """The files in the server's upload folder (``GRADIO_TEMP_DIR`` points the server into ``root/gradio``)."""
    return [path for path in (root / "gradio").rglob("*") if path.is_file()]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.wav", b"RIFF this is not audio" * 8, "This file cannot be transcribed"),
        ("long.wav", make_wav(seconds=40.0, sample_rate=4000), "longer than the 30 s allowed"),
        # The 129-byte upload: ffmpeg, left to probe it, decoded the mp3 it names ("3.0 s of audio").
        ("playlist.wav", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n{mp3}\n#EXT-X-ENDLIST\n",
         "the content is an M3U/HLS playlist"),
        ("list.m4a", "ffconcat version 1.0\nfile server/secret.mp3\n", "the content is an ffconcat list"),
    ],
)  # fmt: skip
def test_a_bad_upload_is_a_message_on_the_page_and_the_server_keeps_serving(
    served, browser, tmp_path, name, content, message
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root, _, url, server = served
    secret = tmp_path / "server" / "secret.mp3"  # a file of the server's that a playlist names
    secret.parent.mkdir()
    tone = "sine=frequency=440:sample_rate=16000:duration=3"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", tone, str(secret)], check=True)
    if isinstance(content, str):
        content = content.format(mp3=secret).encode()
    (tmp_path / name).write_bytes(content)

    upload_and_transcribe(browser, url, tmp_path / name)

    WebDriverWait(browser, 120).until(lambda d: message in d.page_source or "s of audio" in d.page_source)
    assert message in browser.page_source, "refused, not decoded"
    assert server.poll() is None, "the server is still running"
    assert uploads_left(root) == [], "the refused upload was deleted"
    browser.get(url)  # and still answers
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#transcribe"))


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory since the last ``reset_peak_rss`` (VmHWM, kB in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE).group(1)) / 1024


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # proc(5): "5" resets the peak RSS to the current RSS


def test_a_tiny_upload_that_decodes_to_hundreds_of_mb_is_refused_without_the_memory(
    served, browser, tmp_path
):
    root, _, url, server = served
    # The upload, 20 s instead of 119: 8 channels at FLAC's highest rate, ~120 KB on disk, 420 MB of
    # float32 once decoded (the original server decoded it: 2.5 GB and 3 GB more RSS for the 119 s one).
    path = tmp_path / "tiny.flac"
    with soundfile.SoundFile(path, "w", 655_350, 8, format="FLAC", subtype="PCM_16") as flac:
        for _ in range(20):
            flac.write(np.zeros((655_350, 8), dtype=np.int16))  # one second at a time
    assert path.stat().st_size < 0.5 * 2**20  # under the upload cap
    reset_peak_rss(server.pid)
    before = peak_rss_mb(server.pid)

    upload_and_transcribe(browser, url, path)

    from selenium.webdriver.support.ui import WebDriverWait

    # Refused, or (the original server) decoded: 20 s of silence.
    answered = ("This file cannot be transcribed", "This recording is silent", "s of audio")
    WebDriverWait(browser, 120).until(lambda d: any(answer in d.page_source for answer in answered))
    assert "the header declares 8 channels x 655350 Hz x 20.0 s = 400 MB" in browser.page_source
    assert "more than the 64 MB allowed (max_decoded_mb)" in browser.page_source
    assert peak_rss_mb(server.pid) - before < 100, (
        "refused from its header: nothing near 400 MB was allocated"
    )
    assert uploads_left(root) == []


def test_an_upload_over_the_size_cap_is_refused_before_it_reaches_the_model(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root, _, url, server = served
    big = tmp_path / "big.wav"
    big.write_bytes(make_wav(seconds=20.0, sample_rate=16000))  # 640 KB > --max-upload-mb 0.5
    browser.get(url)
    WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#audio input[type=file]"))

    browser.find_element(By.CSS_SELECTOR, "#audio input[type=file]").send_keys(str(big))

    WebDriverWait(browser, 60).until(lambda d: "exceed the maximum allowed size" in d.page_source)
    assert not browser.find_elements(By.CSS_SELECTOR, "#audio a[data-testid='download-link']")
    assert server.poll() is None
    assert uploads_left(root) == [], "nothing of it kept"


def test_stopping_the_server_removes_its_upload_folder(served):
    # Last in this module: it stops the module's server. Each upload above was deleted once answered; an
    # upload never transcribed would go with the folder (or after --upload-max-age-sec).
    root, *_, server = served
    assert len(list((root / "gradio").iterdir())) == 1, "the server's own folder, inside GRADIO_TEMP_DIR"

    server.terminate()  # SIGTERM, as a service manager stops it
    assert server.wait(timeout=30) in (0, -15)

    assert list((root / "gradio").iterdir()) == []
