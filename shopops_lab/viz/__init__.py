"""Pictures of what the queue did: the lease state machine, deliveries per worker, the
crash explorer's map, the stop map of real kills, plots.

Every picture is deterministic (same input, same bytes) so notebooks can store their
outputs. Graphviz draws the diagrams wherever `dot` runs, and the kit's own layout
everywhere else (see `dot.render`); both give the same text alternative. The plots live
in `shopops_lab.viz.plots`, imported on its own so that drawing a diagram never pays for
loading matplotlib (and sketched by the kit where matplotlib is missing).
"""

from shopops_lab.viz.boundaries import outbox_boundaries
from shopops_lab.viz.crash_map import crash_map
from shopops_lab.viz.dot import Diagram, dot_available, render
from shopops_lab.viz.spacetime import spacetime
from shopops_lab.viz.state_machine import (
    last_transition,
    lease_dot,
    lease_svg,
    state_machine,
)
from shopops_lab.viz.stop_map import stop_map
from shopops_lab.viz.timeline import Timeline, build_timeline, timeline

__all__ = [
    "Diagram",
    "Timeline",
    "build_timeline",
    "crash_map",
    "dot_available",
    "last_transition",
    "lease_dot",
    "lease_svg",
    "outbox_boundaries",
    "render",
    "spacetime",
    "state_machine",
    "stop_map",
    "timeline",
]
