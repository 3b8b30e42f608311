"""training.events: rank 0 appends one JSON object per event (type, step, epoch, time, values) and tells its
listeners; other ranks write nothing; a resumed run appends; ``read_events`` reads them back, by type."""

from __future__ import annotations

import json

from asr_pipeline.training.events import EVENTS_FILE, EventLog, read_events


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def on_event(self, kind, step, epoch, values) -> None:
        self.seen.append((kind, step, epoch, values))


def test_each_event_is_one_flushed_line_with_the_schemas_keys_and_listeners_hear_it(tmp_path):
    listener = Recorder()
    log = EventLog(tmp_path / EVENTS_FILE, enabled=True, append=False, listeners=[listener])

    log.write("train", 10, 0, {"loss": 1.5})
    line = (tmp_path / EVENTS_FILE).read_text()  # readable before close: a crashed run keeps its last event
    log.close()

    event = json.loads(line)
    assert set(event) == {"type", "step", "epoch", "time", "values"}
    assert (event["type"], event["step"], event["epoch"], event["values"]) == ("train", 10, 0, {"loss": 1.5})
    assert listener.seen == [("train", 10, 0, {"loss": 1.5})]


def test_a_disabled_log_writes_nothing_and_tells_no_listener(tmp_path):
    listener = Recorder()
    log = EventLog(tmp_path / EVENTS_FILE, enabled=False, append=False, listeners=[listener])

    log.write("train", 1, 0, {})
    log.close()

    assert not (tmp_path / EVENTS_FILE).exists() and listener.seen == []


def test_a_resumed_run_appends_and_a_fresh_one_starts_over_and_reading_filters_by_type(tmp_path):
    first = EventLog(tmp_path / EVENTS_FILE, enabled=True, append=False)
    first.write("train", 1, 0, {})
    first.write("epoch", 2, 0, {"train_loss": 3.0})
    first.close()
    resumed = EventLog(tmp_path / EVENTS_FILE, enabled=True, append=True)
    resumed.write("train", 3, 1, {})
    resumed.close()

    assert [(e["type"], e["step"]) for e in read_events(tmp_path)] == [
        ("train", 1),
        ("epoch", 2),
        ("train", 3),
    ]
    assert [e["step"] for e in read_events(tmp_path, "train")] == [1, 3]
    EventLog(tmp_path / EVENTS_FILE, enabled=True, append=False).close()
    assert read_events(tmp_path) == []
