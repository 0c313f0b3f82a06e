"""The pictures: state machine and lab 06's boundaries (Graphviz and the kit's own layout), timeline,
plots (matplotlib and the sketch), crash map."""

from __future__ import annotations

import base64
import html
import os
import re
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.effects import NaiveEmailAdapter
from shopops_lab.errors import BadArgumentError, StaleTokenError
from shopops_lab.events import EventKind, EventLog
from shopops_lab.states import TRANSITIONS, ItemState
from shopops_lab.viz import _svg, plots
from shopops_lab.viz import dot as dotmod
from shopops_lab.viz.boundaries import outbox_boundaries
from shopops_lab.viz.dot import INSTALL_HINT, NO_DOT_ENV, Diagram, dot_available, render
from shopops_lab.viz.state_machine import last_transition, lease_dot, lease_svg, state_machine
from shopops_lab.viz.timeline import build_timeline, natural_key, timeline
from shopops_lab.worker.queue import InMemoryQueue

EDGES = [((None, ItemState.READY), "enqueue"), *TRANSITIONS.items()]
LABELS = {pair: label for pair, label in EDGES}
RENDERERS = ["dot", "builtin"]


def needs_dot():
    if not dot_available():
        pytest.skip(
            "Graphviz `dot` is not installed: run `sudo apt-get install graphviz` "
            "(or `brew install graphviz`) to test the Graphviz path"
        )


def draw(renderer, *args, **kwargs):
    """The state machine drawn by one renderer, and proof that it was that renderer."""
    if renderer == "dot":
        needs_dot()
    diagram = state_machine(*args, engine="auto" if renderer == "dot" else "fallback", **kwargs)
    assert diagram.engine == renderer
    return diagram


def read_picture(svg):
    """What a picture of the state machine shows, read from either renderer's SVG:
    ({state: count or None}, {edge label: (source, target)}, [labels of lit edges])."""
    states, edges, lit = {}, {}, []
    if 'class="graph"' in svg:  # Graphviz: <g class="node"><title>name</title> ... <text>...</text>
        for name, body in re.findall(r'<g id="node\d+" class="node">\s*<title>(\w+)</title>(.*?)</g>', svg, re.S):
            texts = re.findall(r">([^<>]+)</text>", body)
            if name != "start":
                assert texts[0] == name
                states[name] = int(texts[1]) if len(texts) > 1 else None
        for title, body in re.findall(r'<g id="edge\d+" class="edge">\s*<title>(.*?)</title>(.*?)</g>', svg, re.S):
            source, target = title.replace("&#45;&gt;", "->").split("->")
            label = re.findall(r">([^<>]+)</text>", body)[0]
            edges[label] = (source, target)
            if 'stroke="#d62728"' in body:
                lit.append(label)
    else:  # the kit's own: <g class="state name">, <g class="edge source-target [highlight]">
        for name, body in re.findall(r'<g class="state (\w+)">(.*?)</g>', svg, re.S):
            count = re.search(r'class="count">(\d+)</text>', body)
            states[name] = int(count.group(1)) if count else None
        for source, target, mark, body in re.findall(r'<g class="edge (\w+)-(\w+)( highlight)?">(.*?)</g>', svg, re.S):
            label = re.search(r'class="label">([^<]+)</text>', body).group(1)
            edges[label] = (source, target)
            if mark:
                lit.append(label)
    return states, edges, lit


@pytest.fixture(autouse=True)
def _dot_allowed(monkeypatch):
    monkeypatch.delenv(NO_DOT_ENV, raising=False)


@pytest.fixture
def queue():
    return InMemoryQueue(lease_seconds=30, max_attempts=2, clock=FakeClock())


# ---------------------------------------------------------------- state machine: content
def test_dot_source_has_every_transition_with_its_label_and_the_entry_point():
    source = lease_dot()
    for (src, dst), label in EDGES:
        name = "start" if src is None else src.value
        assert f'{name} -> {dst.value} [label="{label}"];' in source
    assert source.count(" -> ") == len(TRANSITIONS) + 1


@pytest.mark.parametrize("renderer", RENDERERS)
def test_both_renderers_draw_every_state_and_transition_with_its_label(renderer):
    states, edges, lit = read_picture(draw(renderer).svg)
    assert states == {state.value: None for state in ItemState}
    assert edges == {label: ("start" if src is None else src.value, dst.value) for (src, dst), label in EDGES}
    assert lit == []


@pytest.mark.parametrize("renderer", RENDERERS)
def test_counts_from_the_queue_appear_in_every_node(queue, renderer):
    for case in ("O-1001", "A-1002", "O-1003"):
        queue.enqueue(case_id=case)
    lease = queue.acquire("W1")
    queue.ack(lease)
    queue.acquire("W2")
    diagram = draw(renderer, queue)
    states, _, lit = read_picture(diagram.svg)
    assert states == {"ready": 1, "leased": 1, "done": 1, "dead": 0}
    assert lit == ["acquire"]
    assert 'ready [label="ready\\n1"' in diagram.source
    assert "states: ready 1, leased 1, done 1, dead 0;" in diagram.summary


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize(
    "steps, expected",
    [
        ("enqueue", "enqueue"),
        ("acquire", "acquire"),
        ("ack", "ack"),
        ("nack", "expiry / nack"),
        ("expire", "expiry / nack"),
        ("dead", "max attempts"),
        ("replay", "replay"),
        ("heartbeat", "acquire"),  # a heartbeat moves nothing: acquire stays lit
    ],
)
def test_the_last_transition_of_the_queue_is_highlighted(queue, renderer, steps, expected):
    queue.enqueue(case_id="O-1001")
    if steps != "enqueue":
        lease = queue.acquire("W1")
        if steps == "ack":
            queue.ack(lease)
        elif steps == "nack":
            queue.nack(lease, "boom")
        elif steps == "expire":
            queue._expire_leases(now=lease.expires_at + 1)
        elif steps == "heartbeat":
            queue.heartbeat(lease)
        elif steps in ("dead", "replay"):
            queue.nack(lease, "boom")
            queue.nack(queue.acquire("W2"), "boom again")
            if steps == "replay":
                queue.replay_dlq(lease.item_id)
    diagram = draw(renderer, queue)
    assert read_picture(diagram.svg)[2] == [expected]
    assert diagram.summary.endswith(f"highlighted: {expected}")
    lit = [line for line in diagram.source.splitlines() if "penwidth" in line]
    assert len(lit) == 1 and f'label="{expected}"' in lit[0]


@pytest.mark.parametrize("renderer", RENDERERS)
def test_no_transition_yet_means_no_highlight(queue, renderer):
    assert last_transition(queue.log) is None
    assert read_picture(draw(renderer, queue).svg)[2] == []


def test_highlight_can_be_chosen_by_label_or_pair_and_bad_ones_are_named():
    assert read_picture(lease_svg(highlight="max attempts"))[2] == ["max attempts"]
    assert read_picture(lease_svg(highlight=("dead", "ready")))[2] == ["replay"]
    assert read_picture(state_machine(highlight="enqueue", engine="fallback").svg)[2] == ["enqueue"]
    with pytest.raises(BadArgumentError, match="highlight .*'acquire'"):
        state_machine(highlight=("done", "ready"))
    with pytest.raises(BadArgumentError, match="queue"):
        state_machine(queue="not a queue")
    with pytest.raises(BadArgumentError, match="engine"):
        state_machine(engine="neato")


# ---------------------------------------------------------------- both renderers: one text alternative
@pytest.mark.parametrize("renderer", RENDERERS)
def test_every_picture_has_a_title_a_description_a_role_and_fits_the_output_area(queue, renderer):
    queue.enqueue(case_id="O-1001")
    diagram = draw(renderer, queue)
    root = re.match(r"<svg\b[^>]*>", diagram.svg).group(0)
    assert 'role="img"' in root and 'aria-label="lease state machine"' in root and 'class="shopops-diagram"' in root
    assert diagram.svg.split("\n")[1:3] == ["<title>lease state machine</title>", f"<desc>{diagram.summary}</desc>"]
    width = float(re.search(r' width="([\d.]+)"', root).group(1))
    assert width <= 1200 and "pt" not in re.search(r' width="[^"]+"', root).group(0)


def test_both_renderers_give_the_same_description_and_text(queue):
    needs_dot()
    queue.enqueue(case_id="O-1001")
    queue.acquire("W1")
    dot, builtin = state_machine(queue), state_machine(queue, engine="fallback")
    assert dot.engine == "dot" and builtin.engine == "builtin" and dot.svg != builtin.svg
    assert dot.summary == builtin.summary and repr(dot) == repr(builtin)
    assert repr(dot) == f"<Diagram 'lease state machine': {dot.summary}>"


def test_a_wide_graphviz_picture_is_scaled_to_the_output_area():
    needs_dot()
    wide = "digraph { rankdir=LR; " + " -> ".join(f"step{i}" for i in range(30)) + " }"
    svg = render(wide, title="wide").svg
    root = re.match(r"<svg\b[^>]*>", svg).group(0)
    assert 'width="1200"' in root and re.search(r'viewBox="0.00 0.00 (\d+)', root).group(1) > "1000"


# ---------------------------------------------------------------- determinism
def test_builtin_picture_is_identical_twice_and_has_no_ids_or_comments(queue):
    queue.enqueue(case_id="O-1001")
    queue.acquire("W1")
    first, second = state_machine(queue, engine="fallback"), state_machine(queue, engine="fallback")
    assert first.svg == second.svg and first.source == second.source
    assert first.engine == "builtin"
    assert "<!--" not in first.svg and " id=" not in first.svg
    assert first._repr_svg_() == first.svg and first._repr_html_() == second._repr_html_()
    assert shown_svg(first._repr_html_()) == first.svg


def test_graphviz_is_the_default_where_dot_runs_and_the_kits_layout_where_it_does_not(monkeypatch, queue):
    queue.enqueue(case_id="O-1001")
    builtin = state_machine(queue, engine="fallback")
    monkeypatch.setenv(NO_DOT_ENV, "1")
    assert state_machine(queue).engine == "builtin" and state_machine(queue).svg == builtin.svg
    monkeypatch.delenv(NO_DOT_ENV)
    needs_dot()
    assert state_machine(queue).engine == "dot"


def test_graphviz_renders_every_label_deterministically_without_version_comment(queue):
    needs_dot()
    queue.enqueue(case_id="O-1001")
    lease = queue.acquire("W1")
    queue._expire_leases(now=lease.expires_at)
    first, second = state_machine(queue), state_machine(queue)
    assert first.engine == "dot"
    assert first.svg == second.svg
    assert "<!--" not in first.svg and "Generated by" not in first.svg and "<?xml" not in first.svg
    assert first.svg.lstrip().startswith("<svg")
    ids = re.findall(r' id="([^"]+)"', first.svg)
    assert ids and all(re.fullmatch(r"(graph|node|edge)\d+", i) for i in ids)


def test_forced_fallback_shows_the_builtin_picture_or_the_dot_source(monkeypatch, queue):
    queue.enqueue(case_id="O-1001")
    builtin = state_machine(queue, engine="fallback")
    monkeypatch.setenv(NO_DOT_ENV, "1")
    assert not dot_available()
    auto = state_machine(queue, engine="auto")
    assert auto.engine == "builtin" and auto.svg == builtin.svg
    bare = render("digraph { a -> b }")
    assert bare.engine == "source" and bare.svg is None and bare._repr_svg_() is None
    page = bare._repr_html_()
    assert "<pre>digraph { a -&gt; b }</pre>" in page
    assert "sudo apt-get install graphviz" in page and "brew install graphviz" in page
    assert "this page shows the DOT source" in INSTALL_HINT


def test_in_the_browser_the_fallback_says_so_without_install_advice(monkeypatch):
    monkeypatch.setattr(dotmod.sys, "platform", "emscripten")
    assert not dot_available()
    bare = render("digraph { a -> b }")
    assert bare.engine == "source" and "cannot run in the browser" in bare.note
    assert "apt-get" not in bare.note and "brew" not in bare.note
    assert state_machine().engine == "builtin"


def test_missing_dot_on_the_path_falls_back(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not dot_available()
    diagram = render("digraph { a -> b }", fallback_svg="<svg/>")
    assert diagram.engine == "builtin" and diagram.svg == "<svg/>"


def test_a_failing_dot_falls_back_quietly(monkeypatch, tmp_path, capfd):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'dot: something broke' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    diagram = render("digraph { a -> b }")
    assert diagram.engine == "source" and "exit status 3" in diagram.note
    assert capfd.readouterr().err == ""


def test_render_checks_its_arguments():
    with pytest.raises(BadArgumentError, match="source"):
        render("  ")
    with pytest.raises(BadArgumentError, match="engine"):
        render("digraph {}", engine="dot!")


def test_clean_svg_strips_prologue_and_comments():
    raw = (
        '<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "x" "y">\n<!-- Generated by graphviz version 9 -->\n'
        "<svg><!-- a --><g/></svg>\n"
    )
    assert dotmod.clean_svg(raw) == "<svg><g/></svg>\n"


def test_svg_elements_round_geometry_keep_style_as_given_and_in_order():
    assert (
        _svg.rect(1.04, 2, 3.25, 4, fill="#fff", fill_opacity=0.16, stroke_dasharray=None, cls="bar")
        == '<rect x="1" y="2" width="3.2" height="4" fill="#fff" fill-opacity="0.16" class="bar"/>'
    )
    assert _svg.line(0, -0.01, 5, 5, stroke_width=1) == '<line x1="0" y1="0" x2="5" y2="5" stroke-width="1"/>'
    assert _svg.circle(1, 2, 4.5) == '<circle cx="1" cy="2" r="4.5"/>'
    assert _svg.path("M", 0, 1.25, "Q", 2, 3, 4, 5) == '<path d="M 0 1.2 Q 2 3 4 5"/>'
    assert _svg.cross(10, 10, 4) == '<path d="M 6 6 L 14 14 M 6 14 L 14 6"/>'
    assert _svg.polyline([(0, 0), (1.5, 2)]) == '<polyline points="0,0 1.5,2"/>'
    assert (
        _svg.group("lease open", "<a/>", "<b/>", tip="W1 & W2")
        == '<g class="lease open"><title>W1 &amp; W2</title><a/><b/></g>'
    )


# ---------------------------------------------------------------- timeline
def crash_and_redelivery_log():
    """W1 takes O-1001, emails, crashes; W10 gets it after expiry and emails again
    (a naive adapter: duplicate); W2 handles A-1002 and pauses; W1 comes back stale."""
    clock = FakeClock()
    q = InMemoryQueue(lease_seconds=30, clock=clock)
    email = NaiveEmailAdapter(log=q.log, clock=clock)
    q.enqueue(case_id="O-1001")
    q.enqueue(case_id="A-1002")
    stale = q.acquire("W1")
    clock.set(1)
    other = q.acquire("W2")
    clock.set(4)
    q.ack(other)
    q.log.append(EventKind.WORKER_PAUSED, 4.0, worker_id="W2")
    clock.set(5)
    email.send("O-1001:email:3", case_id="O-1001", worker_id="W1")
    q.log.append(EventKind.WORKER_CRASHED, 6.0, worker_id="W1")
    q.log.append(EventKind.WORKER_RESUMED, 8.0, worker_id="W2")
    clock.set(31)
    again = q.acquire("W10")
    clock.set(33)
    email.send("O-1001:email:3", case_id="O-1001", worker_id="W10")
    clock.set(35)
    q.ack(again)
    q.log.append(EventKind.WORKER_RESUMED, 40.0, worker_id="W1")
    clock.set(41)
    with pytest.raises(StaleTokenError):
        q.ack(stale)
    return q.log


def test_timeline_reads_lanes_leases_links_bands_and_contacts():
    data = build_timeline(crash_and_redelivery_log())
    assert data.lanes == ("W1", "W2", "W10")
    assert [(s.worker_id, s.case_id, s.outcome, s.start, s.end) for s in data.leases] == [
        ("W1", "O-1001", "expired", 0.0, 30.0),  # ends at its deadline, not when noticed
        ("W2", "A-1002", "acked", 1.0, 4.0),
        ("W10", "O-1001", "acked", 31.0, 35.0),
    ]
    assert [(link.item_id, link.source, link.target) for link in data.links] == [("item-0001", 0, 2)]
    assert [(b.worker_id, b.kind, b.start, b.end, b.open) for b in data.bands] == [
        ("W2", "pause", 4.0, 8.0, False),
        ("W1", "crash", 6.0, 40.0, False),
    ]
    assert [(c.worker_id, c.duplicate) for c in data.contacts] == [("W1", False), ("W10", True)]
    assert [(r.worker_id, r.token) for r in data.rejections] == [("W1", 1)]
    assert data.note == "" and data.total_leases == 3


def test_timeline_svg_draws_them_in_natural_lane_order():
    svg = timeline(crash_and_redelivery_log()).svg
    lanes = re.findall(r'class="lane">(W\d+)</text>', svg)
    assert lanes == ["W1", "W2", "W10"]
    assert svg.count('<g class="lease expired">') == 1 and svg.count('<g class="lease acked">') == 2
    assert svg.count('<g class="link">') == 1
    assert svg.count('<g class="band crash">') == 1 and svg.count('<g class="band pause">') == 1
    assert svg.count('<g class="contact duplicate">') == 1 and svg.count('<g class="contact sent">') == 1
    assert svg.count('<g class="rejection">') == 1
    assert "time (s)" in svg and "showing" not in svg


def test_timeline_filters_by_case_worker_and_time():
    log = crash_and_redelivery_log()
    only_a = build_timeline(log, cases=["A-1002"])
    assert only_a.lanes == ("W2",) and [s.case_id for s in only_a.leases] == ["A-1002"] and not only_a.links
    only_w10 = build_timeline(log, workers=["W10"])
    assert only_w10.lanes == ("W10",) and len(only_w10.leases) == 1 and not only_w10.bands
    early = build_timeline(log, until=20)
    assert [(s.worker_id, s.outcome, s.end) for s in early.leases] == [("W1", "open", 20.0), ("W2", "acked", 4.0)]
    assert not early.links and [b.open for b in early.bands] == [False, True]
    assert early.contacts[0].duplicate is False and len(early.contacts) == 1


def test_a_duplicated_delivery_is_a_second_bar_and_the_loser_is_marked_lost():
    log = EventLog()
    held = dict(item_id="item-0001", case_id="O-1001", token=1, attempt=1)
    log.append(EventKind.LEASED, 0.0, worker_id="W1", **held)
    log.append(EventKind.DELIVERED_TWICE, 1.0, worker_id="W2", first_worker="W1", **held)
    log.append(EventKind.ACKED, 3.0, worker_id="W2", **held)
    log.append(EventKind.LEASE_LOST, 4.0, worker_id="W1", op="ack", reason="settled", **held)
    data = build_timeline(log)
    assert [(s.worker_id, s.outcome, s.copy, s.end) for s in data.leases] == [
        ("W1", "lost", False, 4.0),
        ("W2", "acked", True, 3.0),
    ]
    assert data.links == ()
    svg = timeline(log).svg
    assert '<g class="lease lost">' in svg and '<g class="lease acked copy">' in svg


def test_a_cut_window_ends_where_the_first_left_out_lease_begins():
    log = EventLog()
    for i in range(3):
        log.append(
            EventKind.LEASED, float(i), item_id=f"item-{i}", case_id=f"O-{i}", worker_id=f"W{i + 1}", token=1, attempt=1
        )
    log.append(EventKind.ACKED, 5.0, item_id="item-0", case_id="O-0", worker_id="W1", token=1, attempt=1)
    data = build_timeline(log, max_leases=2)
    assert [(s.worker_id, s.outcome, s.end) for s in data.leases] == [("W1", "open", 2.0), ("W2", "open", 2.0)]
    assert data.lanes == ("W1", "W2") and data.end == 2.0
    assert data.note.startswith("showing 2 of 3 leases and 2 of 3 workers;")


def big_log(leases, workers):
    log = EventLog()
    for i in range(leases):
        t = float(i)
        item = f"item-{i:05d}"
        log.append(
            EventKind.LEASED,
            t,
            item_id=item,
            case_id=f"O-{i}",
            worker_id=f"W{i % workers + 1}",
            token=1,
            attempt=1,
            expires_at=t + 30,
        )
        log.append(
            EventKind.ACKED,
            t + 0.5,
            item_id=item,
            case_id=f"O-{i}",
            worker_id=f"W{i % workers + 1}",
            token=1,
            attempt=1,
        )
    return log


def test_a_large_log_is_cut_to_a_window_with_a_note():
    diagram = timeline(big_log(2000, 1))
    assert diagram.note == ("showing 60 of 2,000 leases; pass cases=[...], workers=[...] or until=... to zoom")
    assert diagram.svg.count('<g class="lease acked">') == 60
    assert diagram.note in diagram.svg and diagram.note in repr(diagram)
    many = build_timeline(big_log(100, 15))
    assert many.lanes == tuple(f"W{i}" for i in range(1, 13))
    assert many.note.startswith("showing 60 of 100 leases and 12 of 15 workers;")
    assert len(many.leases) == 60


def test_timeline_is_deterministic_and_checks_its_arguments():
    log = crash_and_redelivery_log()
    assert timeline(log).svg == timeline(log).svg
    assert timeline(log, axis="seq").svg != timeline(log).svg
    assert "event number in the log" in timeline(log, axis="seq").svg
    assert " at 0x" not in repr(timeline(log)) and " id=" not in timeline(log).svg
    assert "no leases to show yet" in timeline(EventLog()).svg
    with pytest.raises(BadArgumentError, match="cases"):
        timeline(log, cases="O-1001")
    with pytest.raises(BadArgumentError, match="axis"):
        timeline(log, axis="wall")
    with pytest.raises(BadArgumentError, match="log"):
        timeline([1, 2, 3])
    assert sorted(["W10", "W2", "W1", "worker"], key=natural_key) == ["W1", "W2", "W10", "worker"]


# ---------------------------------------------------------------- plots
def plot_log():
    """12 items over 60 s, one gateway call each (a spike from t=20 to t=30), one DLQ."""
    log = EventLog()
    for i in range(12):
        log.append(EventKind.ENQUEUED, 0.0, item_id=f"item-{i:04d}", case_id=f"O-{i}")
    for i in range(12):
        t = float(i * 5)
        item = dict(item_id=f"item-{i:04d}", case_id=f"O-{i}", worker_id="W1", token=1)
        if t == 20:
            log.append(EventKind.FAULT_INJECTED, t, fault="gateway_spike", source="explicit")
        log.append(EventKind.LEASED, t, **item, attempt=1)
        log.append(EventKind.GATEWAY_CALL, t, worker_id="W1", seconds=10.0 if 20 <= t < 30 else 1.0 + i / 10)
        if i == 11:
            log.append(EventKind.NACKED, t + 1, **item, attempt=1)
            log.append(EventKind.DEAD_LETTERED, t + 1, **item, attempt=1)
        else:
            log.append(EventKind.ACKED, t + 1, **item, attempt=1)
        if t == 25:
            log.append(EventKind.FAULT_INJECTED, t + 5, fault="gateway_spike", phase="over", factor=4.0)
    return log


def test_p95_and_fault_periods_are_read_from_the_log():
    log = plot_log()
    # buckets (t - 10, t], sampled the way metrics.series samples
    assert plots.p95_series(log, bucket=10)[:5] == [
        (0.0, 1.0, 1),
        (10.0, 1.2, 2),
        (20.0, 10.0, 2),
        (30.0, 10.0, 2),
        (40.0, 1.8, 2),
    ]
    assert plots.fault_periods(log) == [(20.0, 30.0, "gateway spike")]
    unfinished = EventLog()
    unfinished.append(EventKind.FAULT_INJECTED, 5.0, fault="gateway_spike")
    unfinished.append(EventKind.FAULT_INJECTED, 6.0, fault="kill_worker", worker_id="W2")  # instants,
    unfinished.append(EventKind.FAULT_INJECTED, 7.0, fault="poison", point="enqueue")  # not periods
    unfinished.append(EventKind.ENQUEUED, 9.0, item_id="item-0001")
    assert plots.fault_periods(unfinished) == [(5.0, 9.0, "gateway spike")]


def test_plots_return_figures_with_their_lines_labels_and_fault_shading():
    log = plot_log()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        depth = plots.depth_plot(log).axes[0]
        latency = plots.latency_plot(log, bucket=10, budget=5).axes[0]
        through = plots.throughput_plot(log, bucket=10, faults=[(0, 5, "chaos")]).axes[0]
        attempts = plots.attempts_plot(log).axes[0]
        board = plots.dashboard(log, bucket=10)
    assert len(depth.lines) == 2 and (depth.get_xlabel(), depth.get_ylabel()) == ("time (s)", "items")
    assert [line.get_label() for line in depth.lines] == ["ready (depth)", "leased (in flight)"]
    assert max(depth.lines[0].get_ydata()) == 11 and depth.lines[0].get_ydata()[-1] == 0  # 12 in, 1 leased at t=0
    assert len(latency.lines) == 2 and latency.get_ylabel() == "p95 latency (s)"
    assert len(latency.patches) == 1 and latency.texts[0].get_text() == "gateway spike"
    assert len(through.lines) == 1 and through.get_ylabel() == "acks per 10 s"
    assert sum(through.lines[0].get_ydata()) == 11 and through.texts[0].get_text() == "chaos"
    assert [bar.get_height() for bar in attempts.patches] == [12]  # every item delivered once
    assert attempts.get_ylabel() == "items"
    assert [ax.get_title() for ax in board.axes] == [
        "queue depth",
        "gateway p95 latency",
        "throughput",
        "attempts histogram",
    ]


def test_plots_render_the_same_png_bytes_twice():
    log = plot_log()
    first = plots.png_bytes(plots.dashboard(log, budget=5))
    second = plots.png_bytes(plots.dashboard(log, budget=5))
    assert first == second and first.startswith(b"\x89PNG")
    assert b"Matplotlib" not in first
    figure = plots.depth_plot(log)
    assert figure._repr_png_() == plots.png_bytes(figure)
    assert repr(figure) == "<PlotFigure 7x3 in, 1 axes>"


def test_empty_logs_plot_no_data_and_bad_arguments_are_named():
    for make in (plots.depth_plot, plots.latency_plot, plots.throughput_plot, plots.attempts_plot):
        assert make(EventLog()).axes[0].texts[0].get_text() == "no data yet"
    with pytest.raises(BadArgumentError, match="faults"):
        plots.depth_plot(plot_log(), faults=[(5, 1, "backwards")])
    with pytest.raises(BadArgumentError, match="bucket"):
        plots.throughput_plot(plot_log(), bucket=0)
    with pytest.raises(BadArgumentError, match="log"):
        plots.depth_plot("log")


def test_diagram_repr_says_what_it_shows():
    assert repr(Diagram(title="x", svg=None, source="digraph {}", engine="source", note="n")) == (
        "<Diagram 'x': no picture, DOT source only; n>"
    )


def test_the_crash_map_marks_the_naive_runners_window_and_draws_the_same_every_time():
    from shopops_lab.crash import explore
    from shopops_lab.recovery import NaiveCheckpointRunner, ReceiptRunner
    from shopops_lab.viz import crash_map

    naive, receipts = explore(NaiveCheckpointRunner()), explore(ReceiptRunner())
    picture = crash_map(naive, receipts)
    svg = picture.svg
    assert svg == crash_map(explore(NaiveCheckpointRunner()), explore(ReceiptRunner())).svg
    assert "NaiveCheckpointRunner" in svg and "ReceiptRunner" in svg
    drawn = re.findall(r">([^<]*)</text>", svg)
    assert drawn.count("restart breaks effect_exactly_once") == 1  # only the naive window
    words = _svg.alt_text(svg)
    assert "NaiveCheckpointRunner: " in words and "1 of them breaks a promise" in words and "ReceiptRunner: " in words
    assert "none breaks a promise" in words
    assert svg.count('fill="#f8c9c9"') == 1
    assert "write intent" in svg and "send email" in svg and "id=" not in svg
    boxes = sum(len([r for r in report.results if r.point is not None]) for report in (naive, receipts))
    assert svg.count("<rect ") == boxes
    with pytest.raises(BadArgumentError, match="reports"):
        crash_map()


# ---------------------------------------------------------------- what nbval compares
def sanitized(text):
    """`text` as nbval sees it with the committed sanitize file (make test passes it)."""
    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((Path(__file__).parent / "nbval_sanitize.cfg").read_text())
    assert patterns, "the sanitize file has no pattern"
    for regex, replace in patterns:
        text = re.sub(regex, replace, text)
    return text


def test_stored_diagrams_compare_equal_across_renderers_and_differ_when_the_picture_does(queue):
    needs_dot()
    queue.enqueue(case_id="O-1001")
    dot, builtin = state_machine(queue), state_machine(queue, engine="fallback")
    assert sanitized(dot.svg) == sanitized(builtin.svg) == f"<diagram lease state machine: {dot.summary}>"
    queue.acquire("W1")
    assert sanitized(state_machine(queue).svg) != sanitized(dot.svg)  # a count and the lit edge changed
    page = f"<p>t=0</p>{dot.svg}<table></table>"  # the playground's static copy
    assert sanitized(page) == f"<p>t=0</p><diagram lease state machine: {dot.summary}><table></table>"
    timeline_svg = timeline(queue.log).svg  # the kit's own pictures: compared whole
    assert sanitized(timeline_svg) == timeline_svg
    boundaries = outbox_boundaries()
    assert sanitized(boundaries.svg) == sanitized(outbox_boundaries(engine="fallback").svg)


# ---------------------------------------------------------------- lab 06: the two boundaries
@pytest.mark.parametrize("renderer", RENDERERS)
def test_the_boundaries_picture_shows_both_acknowledgements_in_red_and_fits(renderer):
    if renderer == "dot":
        needs_dot()
    diagram = outbox_boundaries(engine="auto" if renderer == "dot" else "fallback")
    assert diagram.engine == renderer
    svg = diagram.svg
    texts = [html.unescape(t) for t in re.findall(r">([^<>]+)</text>", svg)]
    for label in (
        "dispatcher",
        "broker",
        "payments consumer",
        "read pending",
        "publish",
        "deliver",
        "apply",
        "record id",
        "mark sent",
        "refunds database: one local transaction",
        "payments database: one local transaction",
        "out-0001 is published again",
        "out-0001 is delivered again",
    ):
        assert label in texts, label
    red = re.findall(r'fill="#d62728"[^>]*>([^<]+)</text>', svg)
    assert sorted(red) == ["(1) publisher confirm", "(2) consumer ack"]
    root = re.match(r"<svg\b[^>]*>", svg).group(0)
    assert float(re.search(r' width="([\d.]+)"', root).group(1)) <= 930  # lab 06's output area
    if renderer == "dot":  # drawn narrow enough to show at full size, not shrunk to fit
        assert float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', root).group(1)) * 4 / 3 <= 930
    assert "(1) publisher confirm from broker to dispatcher" in diagram.summary
    assert "(2) consumer ack from payments consumer to broker" in diagram.summary


# ---------------------------------------------------------------- plots without matplotlib
def test_without_matplotlib_plots_are_sketched_with_a_note_and_the_same_numbers(monkeypatch):
    monkeypatch.setitem(sys.modules, "shopops_lab.viz._mpl", None)  # as in Pyodide's core
    log = plot_log()
    sketch = plots.depth_plot(log)
    assert isinstance(sketch, Diagram) and sketch.engine == "builtin"
    assert "The full plot needs the online site" in sketch.svg and "online site" in repr(sketch)
    assert sketch.svg.count('class="line"') == 2
    board = plots.dashboard(log, bucket=10, budget=5)
    assert re.findall(r'font-weight="bold">([^<]+)</text>', board.svg) == [
        "queue depth",
        "gateway p95 latency",
        "throughput",
        "attempts histogram",
    ]
    assert board.svg.count('class="budget"') == 1 and board.svg.count('class="fault"') == 3
    bars = re.findall(r'class="bar"/>\n<text[^>]*>(\d+)</text>', board.svg)
    assert bars == ["12"]  # every item delivered once, as matplotlib's bar says
    assert re.findall(r">([^<]*)</text>", plots.attempts_plot(EventLog()).svg).count("no data yet") == 1
    assert plots.dashboard(log, bucket=10, budget=5).svg == board.svg


def test_the_plots_module_imports_without_matplotlib():
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from shopops_lab.viz import plots\nfrom shopops_lab.events import EventLog\n"
        "print(type(plots.depth_plot(EventLog())).__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Diagram"


# ---------------------------------------------------------------- text alternatives a screen reader announces
FRAMED = re.compile(
    r'^<div class="shopops-frame" style="overflow-x: auto; max-width: 100%">(<img [^>]*>)</div>'
    r'(?:<details class="shopops-described"><summary>The picture in words</summary><p>([^<]*)</p></details>)?$'
)
IMG = re.compile(
    r'^<img class="shopops-picture[^"]*" alt="([^"]*)"(?: width="([\d.]+)" height="([\d.]+)")? '
    r'src="data:image/(svg\+xml|png);base64,([A-Za-z0-9+/=]+)"(?: style="min-width: ([\d.]+)px")?>$'
)


def shown(page):
    """(its words, width, mime, bytes) of the one <img> a picture shows itself as in HTML: the
    words are its alt text, or, when they are longer than an alt text may be (250 characters),
    the full text in the collapsible description beside it, whose start the alt text is."""
    framed = FRAMED.match(page)
    assert framed, page[:200]
    img, described = framed.groups()
    found = IMG.match(img)
    assert found, img[:200]
    alt, width, _, kind, data, least = found.groups()
    alt = html.unescape(alt)
    assert len(alt) <= 250
    if width is not None:  # shrinks with the window, but not below 80% (a phone's labels stay legible)
        assert least is not None and float(least) == pytest.approx(0.8 * float(width), abs=0.1)
    if described is None:
        return alt, width, kind, base64.b64decode(data)
    words = html.unescape(described)
    assert alt.endswith(" … (the rest below the picture)") and words.startswith(alt.split(" … ")[0])
    return words, width, kind, base64.b64decode(data)


def shown_svg(page):
    return shown(page)[3].decode("utf-8")


@pytest.mark.parametrize("renderer", RENDERERS)
def test_every_diagram_is_shown_as_an_img_whose_alt_says_what_it_shows(queue, renderer):
    if renderer == "dot":
        needs_dot()
    engine = "auto" if renderer == "dot" else "fallback"
    queue.enqueue(case_id="O-1001")
    queue.acquire("W1")
    for diagram in (state_machine(queue, engine=engine), outbox_boundaries(engine=engine)):
        alt, width, kind, data = shown(diagram._repr_html_())
        assert kind == "svg+xml" and data.decode("utf-8") == diagram.svg
        assert alt == f"{diagram.title}: {diagram.summary}"  # the same words whoever drew it
        assert float(width) <= 1200
    assert "leased 1" in shown(state_machine(queue, engine=engine)._repr_html_())[0]


def test_a_diagram_without_a_picture_shows_its_source_not_an_img():
    bare = render("digraph { a -> b }", title="mine", engine="fallback")
    assert bare._repr_html_().startswith("<p>") and "<img" not in bare._repr_html_()


def test_the_alt_text_escapes_what_it_quotes():
    svg = _svg.document(10, 10, [], label='say "hi" <now>', desc="a & b")
    alt, *_ = shown(_svg.image(svg))
    assert alt == 'say "hi" <now>: a & b'
    assert '"hi"' not in _svg.image(svg).split(" src=")[0].split("alt=", 1)[1][1:-1]


def test_an_alt_text_says_the_title_once_and_a_long_description_goes_beside_the_picture():
    svg = _svg.document(10, 10, [], label="crash map: NaiveCheckpointRunner", desc="NaiveCheckpointRunner: 11 points")
    assert _svg.alt_text(svg) == "crash map: NaiveCheckpointRunner: 11 points"
    long = "; ".join(f"W{n}: item-000{n} from t={n}, acked at t={n + 5}" for n in range(1, 12))
    page = _svg.image(_svg.document(10, 10, [], label="deliveries per worker", desc=long))
    words, *_ = shown(page)
    assert words == f"deliveries per worker: {long}"
    alt = html.unescape(re.search(r'alt="([^"]*)"', page).group(1))
    assert len(alt) <= 250 and alt.endswith("… (the rest below the picture)")
    kept = alt.split(" … ")[0]
    assert words.startswith(kept) and words[len(kept)] == ";"  # cut after a whole item, not in a word


def test_a_timelines_alt_text_names_each_worker_its_leases_crashes_and_sends():
    clock = FakeClock()
    q = InMemoryQueue(lease_seconds=30, clock=clock)
    naive = NaiveEmailAdapter(log=q.log, clock=clock)
    q.enqueue(case_id="O-1001", payload={"idem_key": "k"})
    first = q.acquire("W1")
    naive.send("k", case_id="O-1001", to="j@example.com", body="hi", worker_id="W1")
    q.worker_crashed("W1", case_id="O-1001")
    clock.set(31)
    q.ack(q.acquire("W7"))
    alt, *_ = shown(timeline(q.log)._repr_html_())
    assert alt.startswith("deliveries per worker: 2 leases on 2 workers; 1 redelivery arrow.")
    assert f"W1: {first.item_id} (O-1001) from t=0, expired at t=30" in alt and "crash from t=0" in alt
    assert "a send to O-1001 at t=0" in alt and f"W7: {first.item_id} (O-1001) from t=31, acked at t=31" in alt


def test_a_plots_alt_text_gives_its_panels_numbers():
    log = plot_log()
    board = plots.dashboard(log, budget=5)
    alt, width, kind, data = shown(board._repr_html_())
    assert kind == "png" and data == plots.png_bytes(board) and float(width) == 1100
    assert alt.startswith("dashboard: queue depth, items against time (s);")
    assert "budget line at 5" in alt and "shaded gateway spike from 20 to 30" in alt
    assert "attempts histogram, items against deliveries per item (0: not yet leased); bars 1: 12." in alt
    assert shown(plots.attempts_plot(log)._repr_html_())[0] == (
        "attempts histogram: attempts histogram, items against deliveries per item (0: not yet leased); bars 1: 12."
    )


def test_a_sketched_plot_carries_the_same_words(monkeypatch):
    monkeypatch.setitem(sys.modules, "shopops_lab.viz._mpl", None)
    log = plot_log()
    alt, *_ = shown(plots.attempts_plot(log)._repr_html_())
    assert alt.endswith("bars 1: 12.")
