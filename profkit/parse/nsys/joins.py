"""GPU activity joined to the CUDA API call that issued it and to the NVTX ranges open at that call, in DuckDB.

Attribution, the same semantics as the per-kernel Python loop it replaces (far too slow for a 10^6-kernel
timeline: reports/code_measurements.md): an activity's
call is the runtime (else driver) call with its correlationId in its own process (CUPTI numbers each process's
calls from 1: a child process's first launch has the parent's first correlationId; an export without the
activity's globalPid keeps the first call with that id); its NVTX path is every range open at the call's start
on the calling thread (push/pop ranges) or anywhere in the calling process (start/end ranges), a range being
open at t when start <= t <= end, ordered by start, then end descending, joined by "/".

A CUDA graph launch that nsys traced as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, nsys's default) is a kernel
row of its own named WHOLE_GRAPH + its graph id, with no grid or block, attributed like a kernel through its
cudaGraphLaunch call: its GPU time is counted, its kernels cannot be listed.

How, in O((activities + ranges) log): per calling thread, the start and end + 1 of its relevant ranges cut time
into segments inside which the open set is constant; each range is exploded over the segments it covers (at
most segments x depth rows), the segments that hold a call get their path with one ordered string_agg, and
each call finds its segment with an ASOF join.
"""

from __future__ import annotations

import pyarrow as pa

PATHS = """
create temp table call as
  select correlationId, start, "end", globalTid, globalTid >> 24 as pid,
         row_number() over (partition by correlationId order by src, ord) = 1 as first_any
  from (select * from calls_raw
        qualify row_number() over (partition by globalTid >> 24, correlationId order by src, ord) = 1);
create temp table lthread as select distinct globalTid as tid from call where globalTid is not null;
create temp table rel as
  select l.tid, n.start, n."end", n.text, n.kind, n.ord from nvtx n join lthread l on n.globalTid = l.tid
  where n.kind = 0
  union all
  select l.tid, n.start, n."end", n.text, n.kind, n.ord from nvtx n join lthread l
  on (n.globalTid >> 24) = (l.tid >> 24) where n.kind = 1;
create temp table bound as
  select tid, b, row_number() over (partition by tid order by b) - 1 as seg
  from (select distinct tid, b from (select tid, start as b from rel union all select tid, "end" + 1 from rel));
create temp table cover as
  select r.tid, r.text, r.start, r."end", r.kind, r.ord, s1.seg as first_seg, s2.seg as stop_seg
  from rel r join bound s1 on s1.tid = r.tid and s1.b = r.start join bound s2 on s2.tid = r.tid and s2.b = r."end" + 1
  where s2.seg > s1.seg;
create temp table call_seg as
  select c.correlationId, c.pid, c.globalTid as tid, s.seg from call c asof left join bound s
  on c.globalTid = s.tid and c.start >= s.b;
create temp table seg_path as
  select x.tid, x.seg, string_agg(x.text, '/' order by x.start, x."end" desc, x.kind, x.ord) as path
  from (select tid, text, start, "end", kind, ord, unnest(range(first_seg, stop_seg)) as seg from cover) x
  semi join (select distinct tid, seg from call_seg where seg is not null) u on u.tid = x.tid and u.seg = x.seg
  group by all;
create temp table attributed as
  select c.correlationId, c.pid, c.first_any, c.start as launch_start_ns, c."end" as launch_end_ns,
         c.globalTid as thread, coalesce(p.path, '') as nvtx_path
  from call c left join call_seg s on s.correlationId = c.correlationId and s.pid is not distinct from c.pid
  left join seg_path p on p.tid = s.tid and p.seg = s.seg;
"""

WHOLE_GRAPH = "CUDA graph "

# An activity's call: the one with its correlationId in its process (globalPid), else the first with that id.
OWN_CALL = "a.correlationId = {a}.correlationId and " \
           "(case when {a}.globalPid is null then a.first_any else a.pid = {a}.globalPid >> 24 end)"

KERNELS = """
select n.kernel, coalesce(d.value, '') as function, k.start as start_ns, k."end" as end_ns,
       k."end" - k.start as duration_ns,
       k.gridX || '×' || k.gridY || '×' || k.gridZ as grid, k.blockX || '×' || k.blockY || '×' || k.blockZ as block,
       k.registersPerThread as registers_per_thread, k.staticSharedMemory as static_smem_bytes,
       k.dynamicSharedMemory as dynamic_smem_bytes, k.localMemoryPerThread as local_bytes_per_thread,
       k.streamId as stream, coalesce(a.nvtx_path, '') as nvtx_path, a.launch_start_ns, a.launch_end_ns,
       k.deviceId as device, a.thread, 0 as src, k.ord
from kernels_raw k
left join kernel_names n on n.shortName is not distinct from k.shortName
                         and n.demangledName is not distinct from k.demangledName
left join strings d on d.id = k.demangledName
left join attributed a on {own_k}
union all
select '{graph}' || g.graphId, '{graph}' || g.graphId, g.start, g."end", g."end" - g.start, '', '',
       NULL, NULL, NULL, NULL, g.streamId, coalesce(a.nvtx_path, ''), a.launch_start_ns, a.launch_end_ns,
       g.deviceId, a.thread, 1, g.ord
from graphs_raw g left join attributed a on {own_g}
where not exists (select 1 from kernels_raw k where k.correlationId = g.correlationId
                  and k.globalPid is not distinct from g.globalPid)
order by start_ns, src, ord
""".format(own_k=OWN_CALL.format(a="k"), own_g=OWN_CALL.format(a="g"), graph=WHOLE_GRAPH)

COPIES = """
select {columns}, c.start as start_ns, c."end" as end_ns, c."end" - c.start as duration_ns, c.bytes,
       c.deviceId as device, c.streamId as stream, coalesce(a.nvtx_path, '') as nvtx_path,
       a.launch_start_ns, a.launch_end_ns, a.thread
from {table} c left join attributed a on %s
order by c.start, c.ord
""" % OWN_CALL.format(a="c")

NVTX = """
select coalesce(n.text, s.value, '') as text, n.start as start_ns, n."end" as end_ns,
       n."end" - n.start as duration_ns, n.globalTid as thread,
       case when n.kind = 1 then 'start_end' else 'push_pop' end as kind, n.library = 1 as library
from nvtx_raw n left join strings s on s.id = n.textId
order by n.start, n.ord
"""


def attribute(conn, tables: dict[str, pa.Table], kernel_name) -> dict[str, pa.Table]:
    """kernels, nvtx, memcpy and memset as Arrow tables, from the raw export tables registered in `conn`.

    tables: kernels_raw, graphs_raw, calls_raw (correlationId, start, end, globalTid, src: 0 runtime / 1 driver, ord),
    nvtx_raw (start, end, globalTid, kind: 0 push/pop / 1 start/end, library: 1 for a library domain's range,
    textId, text, ord), memcpy_raw,
    memset_raw, strings (id, value); kernel_name(short, demangled) -> the kernel column."""
    for name, table in tables.items():
        conn.register(name, table)
    conn.execute("create temp table nvtx as select coalesce(n.text, s.value, '') as text, n.start, n.\"end\", "
                 "n.globalTid, n.kind, n.ord from nvtx_raw n left join strings s on s.id = n.textId")
    conn.execute(PATHS)
    pairs = conn.execute("select distinct k.shortName, k.demangledName, s.value, d.value from kernels_raw k "
                         "left join strings s on s.id = k.shortName left join strings d on d.id = k.demangledName"
                         ).fetchall()
    conn.register("kernel_names", pa.table({
        "shortName": pa.array([p[0] for p in pairs], pa.int64()),
        "demangledName": pa.array([p[1] for p in pairs], pa.int64()),
        "kernel": pa.array([kernel_name(p[2] or "", p[3] or "") for p in pairs], pa.string())}))
    return {"kernels": conn.sql(KERNELS).to_arrow_table().drop_columns(["src", "ord"]),
            "nvtx": conn.sql(NVTX).to_arrow_table(),
            "memcpy": conn.sql(COPIES.format(columns="c.copyKind as copy_kind", table="memcpy_raw")).to_arrow_table(),
            "memset": conn.sql(COPIES.format(columns="c.value", table="memset_raw")).to_arrow_table()}
