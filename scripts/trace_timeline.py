#!/usr/bin/env python3
"""trace_timeline.py: draws a Chrome trace (ampgrad train --profile; merged ranks from ampgrad trace merge)
as a PNG timeline with gnuplot: one band per (process, thread) track, spans nested downwards by depth,
coloured by category, for a machine with no browser; the picture says so in its title.
scripts/trace_screenshot.py takes a screenshot of a trace viewer instead (docs/profiling.md).

    python3 scripts/trace_timeline.py runs/z2/merged.json runs/z2/timeline.png
"""
import json
import subprocess
import sys
import tempfile

COLOURS = {"step": "#999999", "module": "#4e79a7", "backward": "#f28e2b", "kernel": "#59a14f",
           "collective": "#e15759", "zero": "#b07aa1", "optim": "#b07aa1", "amp": "#edc948",
           "autocast": "#edc948", "data": "#76b7b2", "checkpoint": "#9c755f"}


def tracks(events):
    """{(pid, tid): [(start_us, dur_us, category, depth)]} with depth from interval nesting."""
    by_track = {}
    for e in events:
        if e.get("ph") == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    out = {}
    for key, spans in sorted(by_track.items()):
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends, rows = [], []
        for e in spans:
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            rows.append((e["ts"], e["dur"], e.get("cat", ""), len(open_ends)))
            open_ends.append(e["ts"] + e["dur"])
        out[key] = rows
    return out


def main(trace_path, png_path):
    events = json.load(open(trace_path))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    by_track = tracks(events)
    t0 = min(s[0] for rows in by_track.values() for s in rows)
    data = tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False)
    labels, band, top = [], 0.0, 0.0
    for (pid, tid), rows in by_track.items():
        depth = max(r[3] for r in rows) + 1
        labels.append((band + depth / 2.0, f"rank {pid} {names.get((pid, tid), tid)}"))
        for start, dur, cat, d in rows:
            y = band + depth - d - 0.5
            colour = int(COLOURS.get(cat, "#bab0ac")[1:], 16)
            data.write(f"{(start - t0) / 1e3 + dur / 2e3} {y} {dur / 2e3} 0.4 {colour}\n")
        band += depth + 1
        top = band
    data.close()
    ytics = ", ".join(f'"{name}" {y}' for y, name in labels)
    legend = "".join(f"set label '{cat}' at graph 0.92, graph {0.97 - i * 0.035} tc rgb '{c}' front\n"
                     for i, (cat, c) in enumerate(COLOURS.items()))
    script = f"""set terminal pngcairo size 1600,{200 + 40 * int(top)} font ',10'
set output '{png_path}'
set title 'ampgrad trace drawn with gnuplot from {trace_path.split("/")[-1]} (a stand-in: not a Perfetto screenshot)'
set xlabel 'ms from the first span'
set yrange [-0.5:{top}]
set ytics ({ytics})
unset key
{legend}plot '{data.name}' using 1:2:3:4:5 with boxxyerror fs solid 0.8 noborder lc rgb variable
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: trace_timeline.py TRACE.json OUT.png")
    main(sys.argv[1], sys.argv[2])
