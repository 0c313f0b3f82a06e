"""Pictures of what the queue did: the lease state machine, deliveries per worker, the
crash explorer's map, plots.

Every picture is deterministic (same input, same bytes) so notebooks can store their
outputs, and none needs Graphviz: see `dot.render` for how it is used when present.
The matplotlib plots live in `shopops_lab.viz.plots`, imported on its own so that
drawing a diagram never pays for loading matplotlib.
"""
from shopops_lab.viz.crash_map import crash_map
from shopops_lab.viz.dot import Diagram, dot_available, render
from shopops_lab.viz.state_machine import (
           last_transition,
           lease_dot,
           lease_svg,
           state_machine,
)
from shopops_lab.viz.timeline import Timeline, build_timeline, timeline

__all__ = ["Diagram", "Timeline", "build_timeline", "crash_map", "dot_available", "last_transition", "lease_dot",
           "lease_svg", "render", "state_machine", "timeline"]
