"""A web demo of a trained run: upload or record audio, read the transcript, the timing and the model card.

``build_app`` makes a Gradio ``Blocks`` page around ``decoding.transcribe.Transcriber`` (the run's own frontend,
windows, greedy or beam search with a word KenLM); ``serve`` runs it. It listens on 127.0.0.1 unless told
otherwise and never opens a public share link. Uploads are capped in size (Gradio refuses larger files before
they reach us), in duration and in decoded size (both from the header before decoding where the format tells;
``io.audio.load_audio``); a file that is not audio, a playlist, too long, too large or silent is a message on the
page, and the server keeps running.

Uploads live in a folder of this server's own (a fresh temporary folder, inside ``GRADIO_TEMP_DIR`` when it is
set), removed when the server stops. Each upload is deleted once it is transcribed or refused; Gradio's
``delete_cache`` deletes the ones never transcribed after ``upload_max_age_sec``. Measured before: ten 19 MB
uploads stayed in Gradio's shared ``/tmp/gradio`` for good.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asr_pipeline.decoding.decoders import DecodingResources
from asr_pipeline.decoding.evaluation import greedy_decoder, load_run
from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.decoding.transcribe import Transcriber, WindowOptions
from asr_pipeline.io.audio import AudioDecodeError, load_audio
from asr_pipeline.models.loading import is_export
from asr_pipeline.run_layout import resolve_run_dir, run_tokenizer
from asr_pipeline.serve.options import ServeOptions
from asr_pipeline.text.tokenizer import CTCTokenizer

GREEDY, BEAM = "greedy", "beam search + LM"


def build_app(
    run_dir: str | Path,
    lm: str | Path | None = None,
    lexicon: str | Path | None = None,
    options: ServeOptions | None = None,
) -> Any:
    """The page (module docstring); ``lm`` (a word KenLM) adds the beam search choice, with ``lexicon`` the
    lexicon search, else the prefix search."""
    import gradio as gr

    options = options or ServeOptions()
    run_dir = resolve_run_dir(run_dir)
    run = load_run(run_dir, options.checkpoint, options.weights)
    tokenizer = CTCTokenizer(run_tokenizer(run_dir).read_bytes(), blank_id=run.blank_id)
    transcribers = {GREEDY: Transcriber(run, tokenizer, greedy_decoder(run, tokenizer), WindowOptions())}
    if lm is not None:
        decoder = "lexicon" if lexicon is not None else "prefix_beam"
        beam = DecodingResources(word_lm=Path(lm), lexicon=Path(lexicon) if lexicon else None).build(
            DecodingOptions(decoder=decoder, beam_width=options.beam_width), tokenizer
        )
        transcribers[BEAM] = Transcriber(run, tokenizer, beam, WindowOptions())
    rate = transcribers[GREEDY].frontend.sample_rate

    def transcribe(audio_path: str | None, choice: str) -> tuple[str, str]:
        if not audio_path:
            raise gr.Error("Upload or record some audio first.")
        if not Path(audio_path).exists():
            raise gr.Error(
                "This upload was deleted from the server once it was transcribed (or refused): upload it again "
                "to transcribe it with another decoder."
            )
        try:
            waveform = load_audio(
                audio_path,
                rate,
                name=Path(audio_path).name,
                max_duration_sec=options.max_duration_sec,
                max_decoded_mb=options.max_decoded_mb,
            )
        except AudioDecodeError as error:  # not audio, a playlist, too long, too large, ...: said on the page
            raise gr.Error(f"This file cannot be transcribed: {error}") from None
        finally:
            delete_upload(Path(audio_path))
        if not waveform.any():
            raise gr.Error("This recording is silent.")
        started = time.perf_counter()
        transcript = transcribers[choice].transcribe(waveform, Path(audio_path).name)
        seconds = time.perf_counter() - started
        timing = f"{transcript.duration_sec:.1f} s of audio in {seconds:.2f} s ({choice}; real-time factor {seconds / transcript.duration_sec:.3f})"
        return transcript.text, timing

    # Every minute, the uploads older than upload_max_age_sec (those never transcribed) are deleted.
    delete_cache = (60, options.upload_max_age_sec)
    with gr.Blocks(title=f"asr_pipeline: {run.architecture}", delete_cache=delete_cache) as app:
        gr.Markdown(f"# Speech recognition demo\n{run.architecture} model from `{run_dir.name}`")
        audio = gr.Audio(sources=["upload", "microphone"], type="filepath", label="Audio", elem_id="audio")
        choice = gr.Radio(list(transcribers), value=GREEDY, label="Decoder", elem_id="decoder")
        button = gr.Button("Transcribe", variant="primary", elem_id="transcribe")
        text = gr.Textbox(label="Transcript", elem_id="transcript", interactive=False)
        timing = gr.Markdown(elem_id="timing")
        with gr.Accordion("Model card", open=False):
            gr.Markdown(model_card_text(run_dir, run))
        button.click(transcribe, inputs=[audio, choice], outputs=[text, timing])
    return app


def model_card_text(run_dir: Path, run: Any) -> str:
    """The exported folder's README.md (its YAML header left out), else a short summary of the run."""
    card = run_dir / "README.md"
    if is_export(run_dir) and card.is_file():
        parts = card.read_text().split("---\n", 2)
        return parts[2] if len(parts) == 3 else card.read_text()
    params = sum(p.numel() for p in run.model.parameters())
    return f"`{run.architecture}`, {params:,} parameters, trained in `{run_dir}` (export it for a full model card)."


def serve(
    run_dir: str | Path,
    *,
    lm: str | Path | None = None,
    lexicon: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 7860,
    options: ServeOptions | None = None,
) -> None:
    """Run the page until interrupted or terminated (never a public share link); its upload folder goes with it."""
    options = options or ServeOptions()
    with private_upload_folder():
        app = build_app(run_dir, lm, lexicon, options)
        # SIGTERM as Ctrl-C: Gradio then closes the server and the upload folder is removed (else it would stay).
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        app.queue().launch(
            server_name=host,
            server_port=port,
            share=False,
            max_file_size=int(options.max_upload_mb * 2**20),  # bytes
            show_error=True,
            prevent_thread_lock=False,
        )


@contextlib.contextmanager
def private_upload_folder() -> Iterator[Path]:
    """A fresh folder for this server's uploads (``GRADIO_TEMP_DIR`` while inside), removed on the way out.

    Gradio reads ``GRADIO_TEMP_DIR`` when the page is built and when the server starts; inside ``GRADIO_TEMP_DIR``
    (or the system's temporary folder) when that was set already.
    """
    previous = os.environ.get("GRADIO_TEMP_DIR")
    folder = Path(tempfile.mkdtemp(prefix="asr-pipeline-serve-", dir=previous or None))
    os.environ["GRADIO_TEMP_DIR"] = str(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if previous is None:
            os.environ.pop("GRADIO_TEMP_DIR", None)
        else:
            os.environ["GRADIO_TEMP_DIR"] = previous


def delete_upload(path: Path) -> None:
    """Delete an upload Gradio stored at ``<upload folder>/<content hash>/<name>``, and its folder when that
    is left empty (never anything outside the upload folder)."""
    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder()).resolve()
    path = path.resolve()
    if folder not in path.parents:
        return
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another upload of the same content may still be there
        if path.parent != folder:
            path.parent.rmdir()


__all__ = [
    "BEAM",
    "GREEDY",
    "ServeOptions",
    "build_app",
    "delete_upload",
    "model_card_text",
    "private_upload_folder",
    "serve",
]
