"""Read a memlens profile from Python: every table is a Parquet file, so pyarrow
and pandas load them directly (DuckDB and polars too).

    python3 examples/load_profile.py PROFILE_DIR

prints, as JSON: the run's command, the largest allocation sites by bytes
allocated (stack frames joined from `stacks`), each region's exact bytes and
bandwidth, and the access samples per thread.
"""
import json
import pathlib
import sys

import pyarrow.parquet as pq


def table(profile, name):
    """One table as a pandas DataFrame (empty when the run did not write it)."""
    path = profile / f"{name}.parquet"
    return pq.read_table(path).to_pandas() if path.exists() else None


def main():
    profile = pathlib.Path(sys.argv[1])
    meta = json.loads((profile / "meta.json").read_text())

    # Heap allocation sites, every recorded block summed by stack: exact when
    # every block was recorded, sampled blocks scaled otherwise (the `sampled`
    # column says which).
    heap_sites = table(profile, "sites")
    stacks = table(profile, "stacks")
    by_site = heap_sites.groupby(["pid", "stack_id"]).bytes.sum().nlargest(5)
    sites = []
    for (pid, stack_id), est_bytes in by_site.items():
        frames = stacks[(stacks.pid == pid) & (stacks.stack_id == stack_id)].sort_values("depth")
        top = frames.iloc[0] if len(frames) else None
        where = f"{top.function} ({top.file}:{top.line})" if top is not None else "?"
        sites.append({"site": where, "bytes": float(est_bytes)})

    # Regions: exact bytes (instrumented builds) summed over instances.
    regions = table(profile, "regions")
    region_rows = {}
    if regions is not None and len(regions):
        regions = regions.assign(seconds=(regions.end_ns - regions.begin_ns) / 1e9)
        for name, g in regions.groupby("name"):
            read = int(g.bytes_read.fillna(0).sum())
            region_rows[name] = {
                "instances": len(g),
                "bytes_read": read,
                "read_bandwidth": read / g.seconds.sum() if g.seconds.sum() > 0 else None,
            }

    samples = table(profile, "samples")
    per_thread = {}
    if samples is not None:
        per_thread = {str(tid): int(n) for tid, n in samples.groupby("tid").size().items()}

    json.dump(
        {"command": meta["command"], "sites": sites, "regions": region_rows, "samples_per_thread": per_thread},
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()
