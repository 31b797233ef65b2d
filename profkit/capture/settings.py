"""The settings of `profkit profile`, each field declaring its option (profkit.options): the command's options are
generated from ProfileOptions and the fields nested in it (NcuOptions, GuidedOptions), in field order.

Imports nothing heavy: the cli reads these declarations whenever it starts (`profkit --help`, `profkit show`).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from dataclasses import dataclass

from profkit.capture.ncu import NcuOptions
from profkit.options import nested, option
from profkit.errors import UsageError


@dataclass
class GuidedOptions:
    """How a guided capture (capture.guided) chooses the kernel instances ncu profiles."""

    coverage: float = option("--coverage", type=float, default=0.8, show_default=True,
                             help="Guided: profile instances in rank order until they hold this share of "
                                  "steady-state GPU time.")
    top: int | None = option("--top", min=1, help="Guided: profile exactly the top N instances.")
    torch_modules: bool = option("--torch-modules", is_flag=True,
                                 help="NVTX ranges per nn.Module path, forward and backward, so each kernel names "
                                      "its module (show -t attribution). Off by default: on a training step the "
                                      "hooks cost +10.5% of the step under nsys (H100, interval +4.0 to +14.1%; "
                                      "goal <= 5%; reports/benchmarks/module_hooks_cost.json).")
    no_compile_lines: bool = option("--no-compile-lines", is_flag=True,
                                    help="Do not ask torch.compile for its debug graph in the nsys run. By default "
                                         "that run sets TORCH_COMPILE_DEBUG=1 (into a temporary folder) and turns "
                                         "inductor's FX-graph and AOT caches off, so every compiled graph is lowered "
                                         "again and writes the model's file:line of each generated kernel "
                                         "(show -t attribution, source_line). Triton's kernel cache stays on: on a "
                                         "118.5 M-parameter compiled training step the first step took 6.33 s "
                                         "instead of 1.36 s, the program 14.4 s instead of 13.0 s, the steady step "
                                         "10.97 ms either way (H100, reports/benchmarks/compile_lines_cost.json).")

    def __post_init__(self) -> None:
        if not 0 < self.coverage <= 1:
            raise UsageError(f"--coverage must be in (0, 1], not {self.coverage}")
        if self.top is not None and self.top < 1:
            raise UsageError(f"--top must be at least 1, not {self.top}")


@dataclass
class ProfileOptions:
    """Everything `profkit profile` is told besides its targets and where the session goes."""

    name: str | None = option("--name", help="Session name (default: from the targets).")
    arch: str | None = option("--arch", help="Build arch for .cu targets (default: the GPU's own).")
    args: list[str] = option("--args", default="", parse=shlex.split,
                             help="Arguments for the program, e.g. '1024 4096'.")
    nsys: bool = option("--nsys", is_flag=True,
                        help="Also capture with nsys --trace=cuda,nvtx --cuda-graph-trace=node and export SQLite.")
    quick: bool = option("--quick", is_flag=True,
                         help="Collect only the metrics profkit's tables read (ncu --metrics, no section set): fewer "
                              "replay passes; the source view and the excess-sector columns stay empty.")
    ncu: NcuOptions = nested(NcuOptions)
    ncu_reps: int = option("--reps-under-ncu", type=int, default=1, show_default=True,
                           help="Timed launches per size when a profkit harness program runs under ncu.")
    guided: bool | None = option(
        "--guided/--plain",
        help="Guided (the default for a program that is not a profkit harness and gets no ncu filter): nsys first, "
             "then ncu on one steady-state launch of each kernel instance, in order of GPU time, until --coverage of "
             "it is profiled. --plain: ncu alone on the first launches (or your filters).")
    """None: guided for a foreign program given no ncu filter (profile.is_guided)."""
    guide: GuidedOptions = nested(GuidedOptions)
    repeat: int = option("--repeat", min=1, default=1, show_default=True,
                         help="Capture each target under ncu N times: `diff --fail-if` then gates only beyond the "
                              "spread.")
    timeout: float = option("--timeout", type=float, default=3600, show_default=True, help="Seconds per step.")
    python: str = sys.executable
    """The interpreter that runs a .py target."""

    def __post_init__(self) -> None:
        if self.quick:  # ncu collects the tables' metrics (and the extra ones asked for) instead of a section set
            from profkit.parse.catalog import quick_metrics

            wanted = quick_metrics()
            self.ncu = dataclasses.replace(self.ncu, set_name=None, import_source=False,  # no source view to show
                                           metrics=wanted + [m for m in self.ncu.metrics if m not in wanted])
