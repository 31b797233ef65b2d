"""Why ncu and nsys disagree on microsecond kernels: the same kernels (benchmarks/ncu_short_kernels.cu: an FMA loop
of 1 .. 16384 iterations, and a 1 MB copy) timed by nsys and by ncu under --cache-control all|none and
--clock-control none|base, one launch each (the 21st) under ncu.

    python benchmarks/ncu_short_kernels.py OUT.json        # on the GPU machine (nvcc, nsys, ncu, ncu_report)

What it showed on the H200 (reports/benchmarks/ncu_short_kernels.json; the figures: reports/code_measurements.md):
at the same SM clock ncu's gpu__time_duration is nsys' kernel time plus a fixed cost, larger with --cache-control
all (the flush leaves the first accesses cold); --clock-control base scales long kernels by the clock ratio
instead.
"""
import json, sqlite3, statistics, subprocess, sys
from pathlib import Path
import ncu_report
out = sys.argv[1]
exe = "/tmp/ncu_short_kernels"
subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", exe, str(Path(__file__).with_suffix(".cu"))], check=True)
subprocess.run(["nsys", "profile", "--trace=cuda", "-o", "/tmp/cc", "-f", "true", exe], check=True, capture_output=True)
subprocess.run(["nsys", "export", "--type", "sqlite", "-o", "/tmp/cc.sqlite", "-f", "true", "/tmp/cc.nsys-rep"], check=True, capture_output=True)
c = sqlite3.connect("/tmp/cc.sqlite")
nsys = {}
for name, d in c.execute("select s.value, k.end-k.start from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id=k.shortName order by k.start"):
    nsys.setdefault(name, []).append(d)
result = {"nsys_median_ns": {k: statistics.median(v[5:]) for k, v in nsys.items()}, "ncu": {}}
M = "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max,sm__cycles_active.avg,dram__bytes_read.sum"
for cache in ("all", "none"):
    for clock in ("none", "base"):
        rep = f"/tmp/cc_{cache}_{clock}"
        r = subprocess.run(["ncu", "--metrics", M, "--cache-control", cache, "--clock-control", clock, "--filter-mode", "per-launch-config",
                            "--launch-skip", "20", "--launch-count", "1", "-f", "-o", rep, exe], capture_output=True, text=True)
        ctx = ncu_report.load_report(rep + ".ncu-rep")
        rows = {}
        for i in range(ctx.num_ranges()):
            rg = ctx.range_by_idx(i)
            for j in range(rg.num_actions()):
                a = rg.action_by_idx(j)
                rows[a.name()] = {m: a.metric_by_name(m).as_double() for m in M.split(",")}
        result["ncu"][f"cache_{cache}_clock_{clock}"] = rows
print(json.dumps(result, indent=1))
json.dump(result, open(out, "w"), indent=1)
