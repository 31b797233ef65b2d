"""Dump every ncu report in a folder to one CSV: report, index, kernel (demangled), grid, block, dynamic smem,
function_pcs, context, stream, duration (gpu__time_duration.sum, ns when measured)."""
import csv, glob, os, sys
import ncu_report

folder, out = sys.argv[1], sys.argv[2]
keys = ["launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z", "launch__block_dim_x",
        "launch__shared_mem_per_block_dynamic", "launch__context_id", "launch__stream_id", "launch__function_pcs",
        "launch__registers_per_thread", "gpu__time_duration.sum"]
with open(out, "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["report", "index", "kernel", "mangled"] + keys)
    for path in sorted(glob.glob(os.path.join(folder, "*.ncu-rep"))):
        ctx = ncu_report.load_report(path)
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for a in range(rng.num_actions()):
                act = rng.action_by_idx(a)
                vals = []
                for k in keys:
                    m = act.metric_by_name(k)
                    vals.append("" if m is None else m.value())
                w.writerow([os.path.basename(path), a, act.name(act.NameBase_DEMANGLED)[:300],
                            act.name(act.NameBase_MANGLED)[:200]] + vals)
print("wrote", out)
