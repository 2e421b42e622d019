#!/usr/bin/python3
"""Reports for bench/compare and bench/sweeps: medians, ratios, SVG plots.

    compare_report.py compare RESULTS [--docs FILE --img-dir DIR]
    compare_report.py sweeps RESULTS [--docs FILE --img-dir DIR]
    compare_report.py line FILE      (one run's JSON as one line)

RESULTS holds meta.json (what ran, written by the shell script) and runs.tsv
(one line per load run: its coordinates, exit status and JSON file). The
report goes to RESULTS/report.md (compare) or RESULTS/sweeps.md (sweeps), the
plots to RESULTS/*.svg. With --docs, the report replaces the section between
<!-- compare:begin --> and <!-- compare:end --> (or sweeps:...) of FILE,
appending the markers when absent, and the plots are copied to --img-dir.

Standard library only, except matplotlib for the plots (Debian's
python3-matplotlib; without it the report says the plots are missing).
"""

import argparse
import csv
import json
import math
import os
import shutil
import statistics
import sys

CD_ORDER = ["1x1", "1x16", "16x16", "64x8", "256x4"]
OPS = ["null", "getattr", "lookup", "access", "read", "write", "create-remove", "readdirplus", "mix"]
SERVER_ORDER = ["echo", "rnfs-lwq", "rnfs-listwalk", "rnfs-wakeall", "ganesha-vfs", "rnfs-mem", "ganesha-mem"]
# One colour and line style per server in every plot.
SERVER_STYLE = {
    "echo": ("#7f7f7f", ":"), "rnfs-lwq": ("#1f77b4", "-"), "rnfs-listwalk": ("#17becf", "-"),
    "rnfs-wakeall": ("#9467bd", "-"), "ganesha-vfs": ("#d62728", "--"), "rnfs-mem": ("#2ca02c", "-"),
    "ganesha-mem": ("#ff7f0e", "--"),
}


def style(server):
    colour, ls = SERVER_STYLE.get(server, (None, "-"))
    return {"color": colour, "linestyle": ls} if colour else {"linestyle": ls}


# ---------------------------------------------------------------- helpers

def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_runs(results):
    """runs.tsv as a list of dicts; each gets "data" (the JSON) or None."""
    path = os.path.join(results, "runs.tsv")
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            file = row.get("json") or ""
            full = file if os.path.isabs(file) else os.path.join(results, file)
            data = load_json(full) if file else None
            # The local baselines count ops (`rnfs bench fileio`) or entries
            # (`rnfs bench dirio`), not calls.
            done = (data.get("calls") or data.get("ops") or data.get("entries") or 0) if isinstance(data, dict) else 0
            ok = row.get("rc") == "0" and done > 0
            row["data"] = data if ok else None
            row["ok"] = ok
            rows.append(row)
    return rows


def med(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(values) if values else None


def fmt(v, digits=None):
    """A number with sensible precision; '-' when missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if digits is not None:
        return f"{v:.{digits}f}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}".replace(",", " ")
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def spread(values):
    """'median [min–max]' of a list of numbers."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt(m)
    return f"{fmt(m)} [{fmt(min(values))}–{fmt(max(values))}]"


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def metrics(data):
    """The figures the reports use, from one load-generator JSON object."""
    return {
        "cps": get(data, "calls_per_s"),
        "mbps": get(data, "mb_per_s"),
        "p50": get(data, "latency_us", "p50"),
        "p99": get(data, "latency_us", "p99"),
        "srv_cpu": get(data, "server", "cpu_us_per_call"),
        "lg_cpu": get(data, "loadgen", "cpu_us_per_call"),
        "rss_start": get(data, "server", "rss_kib_start"),
        "rss_end": get(data, "server", "rss_kib_end"),
        "errors": get(data, "error_calls") or 0,
        "calls": get(data, "calls") or 0,
        # READDIRPLUS: one call is one page; these are per entry returned.
        "entries_per_s": get(data, "entries_per_s") or None,
        "ns_per_entry": (1e9 / get(data, "entries_per_s")) if get(data, "entries_per_s") else None,
        "lat_ns_per_entry": (1e3 * get(data, "us_per_entry")) if get(data, "us_per_entry") is not None else None,
        "srv_cpu_ns_per_entry": (1e3 * get(data, "server_cpu_us_per_entry"))
        if get(data, "server_cpu_us_per_entry") is not None else None,
    }


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def best(vals, higher_is_better=False):
    """The best of a point's runs: the highest rate or the lowest cost."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return max(vals) if higher_is_better else min(vals)


def fmt_best(v):
    return "-" if v is None else f"{v:.2f}x"


def paired_ratio(a_by_rep, b_by_rep):
    """Median ratio of medians, and the min–max of the per-repetition ratios."""
    reps = sorted(set(a_by_rep) & set(b_by_rep))
    per = [ratio(a_by_rep[r], b_by_rep[r]) for r in reps]
    per = [p for p in per if p is not None]
    whole = ratio(med(list(a_by_rep.values())), med(list(b_by_rep.values())))
    return whole, per


def fmt_paired(whole, per):
    if whole is None:
        return "-"
    if len(per) > 1:
        return f"{whole:.2f}x [{min(per):.2f}–{max(per):.2f}]"
    return f"{whole:.2f}x"


def splice_docs(docs, name, body):
    """Replaces <!-- NAME:begin --> ... <!-- NAME:end --> in DOCS with BODY."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = open(docs).read() if os.path.exists(docs) else ""
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text and text.index(begin) < text.index(end):
        before = text[: text.index(begin)]
        after = text[text.index(end) + len(end):]
        text = before + block + after
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(docs, "w") as f:
        f.write(text)


def plotting():
    """matplotlib.pyplot in SVG mode, or None."""
    try:
        import matplotlib
        matplotlib.use("svg")
        matplotlib.rcParams["svg.hashsalt"] = "rnfs"  # stable SVG ids
        matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def save(plt, fig, results, name, made):
    path = os.path.join(results, name)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    made.append(name)


def meta_lines(meta):
    out = []
    m = meta.get("machine", {})
    if m:
        out.append(
            f"Machine: {m.get('cpu', '?')}, {m.get('nproc', '?')} CPUs, Linux {m.get('kernel', '?')}; "
            f"rnfs {m.get('rnfs_rev', '?')} (release); nfs-ganesha {m.get('ganesha', '?')}"
            + (f"; {m['dentries']:,} cached dentries at the start." if m.get("dentries") is not None else "."))
    return out


def command_block(meta):
    cmd = meta.get("command", "")
    return ["```sh", cmd, "```"] if cmd else []


# ---------------------------------------------------------------- compare

def compare_report(results, img_prefix):
    meta = load_json(os.path.join(results, "meta.json")) or {}
    runs = read_runs(results)
    servers = [s for s in SERVER_ORDER if any(r["server"] == s for r in runs)]
    servers += sorted({r["server"] for r in runs} - set(servers))
    ops = [o for o in OPS if any(r["op"] == o for r in runs)]
    cds = [c for c in CD_ORDER if any(r["cd"] == c for r in runs)]
    cds += sorted({r["cd"] for r in runs} - set(cds))

    # cell[(server, op, cd)] = {"ok": {rep: metrics}, "failed": [reason...], "data": {rep: json}}
    cell = {}
    for r in runs:
        c = cell.setdefault((r["server"], r["op"], r["cd"]), {"ok": {}, "failed": [], "data": {}})
        if r["ok"]:
            c["ok"][r["rep"]] = metrics(r["data"])
            c["data"][r["rep"]] = r["data"]
        else:
            c["failed"].append(f"rep {r['rep']}: {r.get('note') or 'rc ' + r.get('rc', '?')}")

    def series(server, op, cd, key):
        c = cell.get((server, op, cd))
        if not c:
            return {}
        return {rep: m[key] for rep, m in c["ok"].items() if m[key] is not None}

    def median_of(server, op, cd, key):
        return med(list(series(server, op, cd, key).values()))

    lines = []
    lines += meta_lines(meta)
    p = meta.get("params", {})
    lines.append("")
    lines.append(
        f"Method: {p.get('repeat', '?')} repetition(s); in each, every server is started fresh "
        f"and runs the whole matrix, the server order rotating between repetitions; "
        f"{p.get('warmup', '?')} s warm-up then {p.get('duration', '?')} s measured per run; "
        f"`rnfs bench load` ({p.get('loadgen_threads', 1)} thread(s)) on the same machine over "
        f"loopback, holding /dev/cpu_dma_latency at 0 during each run. Figures are medians "
        f"[min–max] over repetitions; a ratio is the ratio of medians [min–max of the "
        f"per-repetition ratios]. CPU µs/call is the server process's utime+stime over the "
        f"measured window (from /proc/PID/stat) divided by the calls; the load generator's own "
        f"CPU is beside it, so a client-bound run is recognisable (its CPU/call × calls/s near "
        f"1,000,000 µs/s = one core).")
    lines.append("")
    lines += command_block(meta)
    lines.append("")
    desc = {}
    try:
        with open(os.path.join(results, "servers.tsv")) as f:
            desc = dict(l.rstrip("\n").split("\t", 1) for l in f if "\t" in l)
    except OSError:
        pass
    if desc:
        lines.append("Servers (all on 127.0.0.1, one at a time):")
        lines.append("")
        for s in servers:
            if s in desc:
                lines.append(f"- **{s}**: {desc[s]}")
        lines.append("")

    # Headline ratios.
    has = lambda s: s in servers
    lines.append("### Ratios: rnfs (lwq, local) / nfs-ganesha (VFS)")
    lines.append("")
    lines.append("Below 1 is better for p99 and CPU per call; above 1 for calls/s.")
    lines.append("")
    head = "| op | C×D | calls/s | p99 latency | server CPU/call |"
    sep = "|---|---|---:|---:|---:|"
    if has("rnfs-mem") and has("ganesha-mem"):
        head += " MEM calls/s | MEM CPU/call |"
        sep += "---:|---:|"
    lines += [head, sep]
    for op in ops:
        for cd in cds:
            if (("rnfs-lwq", op, cd) not in cell) and (("rnfs-mem", op, cd) not in cell):
                continue
            row = f"| {op} | {cd} |"
            for key in ("cps", "p99", "srv_cpu"):
                row += " " + fmt_paired(*paired_ratio(series("rnfs-lwq", op, cd, key),
                                                      series("ganesha-vfs", op, cd, key))) + " |"
            if has("rnfs-mem") and has("ganesha-mem"):
                for key in ("cps", "srv_cpu"):
                    row += " " + fmt_paired(*paired_ratio(series("rnfs-mem", op, cd, key),
                                                          series("ganesha-mem", op, cd, key))) + " |"
            lines.append(row)
    lines.append("")

    # The echo floor.
    if has("echo") and "null" in ops:
        lines.append("### Server CPU per NULL call against the floor (`rnfs bench echo-server`)")
        lines.append("")
        lines.append("| C×D | echo µs/call | rnfs-lwq µs/call | rnfs-lwq / echo | ganesha-vfs µs/call | ganesha-vfs / echo |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for cd in cds:
            e = median_of("echo", "null", cd, "srv_cpu")
            r = median_of("rnfs-lwq", "null", cd, "srv_cpu")
            g = median_of("ganesha-vfs", "null", cd, "srv_cpu")
            if e is None and r is None:
                continue
            lines.append(f"| {cd} | {fmt(e)} | {fmt(r)} | {fmt_ratio(ratio(r, e))} | {fmt(g)} | {fmt_ratio(ratio(g, e))} |")
        lines.append("")

    # The targets at 16x16.
    targets = []
    for op in ("null", "getattr", "lookup", "read", "write"):
        targets.append((f"server CPU/call ≤ 0.25x ganesha ({op}, 16x16)", op, "srv_cpu", 0.25, "le"))
    for op, t in (("null", 2.0), ("getattr", 2.0), ("lookup", 2.0), ("read", 1.5), ("write", 1.5)):
        targets.append((f"calls/s ≥ {t}x ganesha ({op}, 16x16)", op, "cps", t, "ge"))
    for op in ("null", "getattr", "lookup", "read", "write"):
        targets.append((f"p99 ≤ 0.5x ganesha ({op}, 16x16)", op, "p99", 0.5, "le"))
    trows = []
    for name, op, key, bound, how in targets:
        if op not in ops or "16x16" not in cds:
            continue
        whole, per = paired_ratio(series("rnfs-lwq", op, "16x16", key), series("ganesha-vfs", op, "16x16", key))
        if whole is None:
            met = "no data"
        else:
            met = "yes" if (whole <= bound if how == "le" else whole >= bound) else "**no**"
        trows.append(f"| {name} | {fmt_paired(whole, per)} | {met} |")
    if trows:
        lines.append("### Issue 5 targets (rnfs-lwq vs ganesha-vfs, 16x16)")
        lines.append("")
        lines += ["| target | measured | met? |", "|---|---:|---|"] + trows
        lines.append("")

    # Per-op detail.
    lines.append("### Every run, per op")
    lines.append("")
    lines.append("<details><summary>Per-op tables (every server, every C×D)</summary>")
    lines.append("")
    lines.append("calls/s and server CPU are medians [min–max]; latencies are medians of the runs' percentiles; "
                 "\"cores busy\" is CPU per call × calls/s (2 cores in all: a run where neither side is near 1 is "
                 "bound by latency, not CPU).")
    lines.append("")
    failures = []
    for op in ops:
        lines.append(f"#### {op}")
        lines.append("")
        lines.append("| C×D | server | calls/s | p50 µs | p99 µs | server CPU µs/call | loadgen CPU µs/call | cores busy server / loadgen | errors |")
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for cd in cds:
            for s in servers:
                c = cell.get((s, op, cd))
                if not c:
                    continue
                oks = c["ok"]
                errs = sum(m["errors"] for m in oks.values())
                calls = sum(m["calls"] for m in oks.values())
                errtxt = "0" if not errs else f"{errs} ({100.0 * errs / max(calls, 1):.1f}%)"
                if c["failed"]:
                    errtxt += f"; FAILED {len(c['failed'])}/{len(c['failed']) + len(oks)}"
                    failures += [f"{s} {op} {cd} {f}" for f in c["failed"]]
                if not oks:
                    lines.append(f"| {cd} | {s} | FAILED | - | - | - | - | - | {errtxt} |")
                    continue
                cores = lambda key: med([m[key] * m["cps"] / 1e6 for m in oks.values()
                                         if m[key] is not None and m["cps"] is not None])
                lines.append(
                    f"| {cd} | {s} | {spread(list(series(s, op, cd, 'cps').values()))} | "
                    f"{fmt(median_of(s, op, cd, 'p50'))} | {fmt(median_of(s, op, cd, 'p99'))} | "
                    f"{spread(list(series(s, op, cd, 'srv_cpu').values()))} | "
                    f"{fmt(median_of(s, op, cd, 'lg_cpu'))} | {fmt(cores('srv_cpu'), 2)} / {fmt(cores('lg_cpu'), 2)} | {errtxt} |")
        lines.append("")
    lines.append("</details>")
    lines.append("")
    if failures:
        lines.append("### Failed runs")
        lines.append("")
        for f in failures:
            lines.append(f"- {f}")
        lines.append("")
        lines.append("Logs are in the results directory (`logs/`).")
        lines.append("")

    # Hand-off histogram table.
    sched = load_json(os.path.join(results, "sched.json"))
    hist = handoff_histograms(sched) if isinstance(sched, list) else {}
    if hist:
        lines.append("### Scheduler hand-off in 300 ns bins (`rnfs bench sched --mode loopback`)")
        lines.append("")
        lines += command_block({"command": meta.get("sched_command", "")})
        lines.append("")
        centres = next(iter(hist.values()))["centres"]
        labels = [bin_label(c) for c in centres]
        lines.append("| policy | threads | calls/s | p50 ns | p99 ns | " + " | ".join(labels) + " |")
        lines.append("|---|---:|---:|---:|---:|" + "---:|" * len(labels))
        for (policy, threads), h in sorted(hist.items(), key=lambda kv: (kv[0][1], policy_rank(kv[0][0]))):
            lines.append(f"| {policy} | {threads} | {fmt(h['cps'])} | {fmt(h['p50'])} | {fmt(h['p99'])} | "
                         + " | ".join(f"{p:.1f}" for p in h["percent"]) + " |")
        lines.append("")
        lines.append("Bins are % of hand-offs over all repetitions; calls/s and p50/p99 are medians.")
        lines.append("")

    made = compare_plots(results, cell, servers, ops, cds, hist)
    if made:
        lines.append("### Plots")
        lines.append("")
        for name, title in made:
            lines.append(f"![{title}]({img_prefix}{name})")
            lines.append("")
    elif plotting() is None:
        lines.append("(No plots: matplotlib is missing; install python3-matplotlib.)")
        lines.append("")
    return "\n".join(lines), [n for n, _ in made], meta


def bin_label(c):
    return ">3000" if c >= 1 << 62 else str(c)


def policy_rank(p):
    order = ["lwq", "listwalk", "wakeall"]
    return order.index(p) if p in order else 9


def handoff_histograms(rows):
    """{(policy, threads): {centres, percent, cps, p50, p99}} summed over runs."""
    acc = {}
    for r in rows:
        if not isinstance(r, dict) or r.get("mode") != "loopback":
            continue
        key = (str(r.get("policy")), r.get("threads"))
        a = acc.setdefault(key, {"counts": None, "centres": None, "cps": [], "p50": [], "p99": []})
        bins = r.get("handoff_bins") or []
        counts = [b.get("count", 0) for b in bins]
        if a["counts"] is None:
            a["counts"], a["centres"] = counts, [b.get("centre_ns", 0) for b in bins]
        elif len(counts) == len(a["counts"]):
            a["counts"] = [x + y for x, y in zip(a["counts"], counts)]
        a["cps"].append(r.get("calls_per_sec"))
        a["p50"].append(get(r, "handoff", "p50"))
        a["p99"].append(get(r, "handoff", "p99"))
    out = {}
    for key, a in acc.items():
        if not a["counts"]:
            continue
        total = max(sum(a["counts"]), 1)
        out[key] = {"centres": a["centres"], "percent": [100.0 * c / total for c in a["counts"]],
                    "cps": med(a["cps"]), "p50": med(a["p50"]), "p99": med(a["p99"])}
    return out


def compare_plots(results, cell, servers, ops, cds, hist):
    plt = plotting()
    if plt is None:
        return []
    made = []
    names = []
    # calls/s vs concurrency, one panel per op, one line per server.
    if ops and cds:
        ncol = 3
        nrow = (len(ops) + ncol - 1) // ncol
        fig, axes = plt.subplots(nrow, ncol, figsize=(5 * ncol, 3.6 * nrow), squeeze=False)
        for i, op in enumerate(ops):
            ax = axes[i // ncol][i % ncol]
            for s in servers:
                xs, ys, lo, hi = [], [], [], []
                for j, cd in enumerate(cds):
                    c = cell.get((s, op, cd))
                    v = [m["cps"] for m in c["ok"].values() if m["cps"] is not None] if c else []
                    if v:
                        xs.append(j)
                        ys.append(statistics.median(v))
                        lo.append(ys[-1] - min(v))
                        hi.append(max(v) - ys[-1])
                if xs:
                    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=s, **style(s))
            ax.set_title(op)
            ax.set_xticks(range(len(cds)))
            ax.set_xticklabels(cds)
            ax.set_xlabel("connections × depth")
            ax.set_ylabel("calls/s")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        for k in range(len(ops), nrow * ncol):
            axes[k // ncol][k % ncol].axis("off")
        handles, labels = [], []
        for row in axes:
            for ax in row:
                for h, l in zip(*ax.get_legend_handles_labels()):
                    if l not in labels:
                        handles.append(h)
                        labels.append(l)
        fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 7), bbox_to_anchor=(0.5, 1.02))
        fig.suptitle("calls/s vs concurrency (median, bars: min–max)", y=1.05)
        fig.tight_layout()
        save(plt, fig, results, "compare-calls.svg", names)
        made.append(("compare-calls.svg", "calls/s vs concurrency per op"))

    # Latency CDFs at 16x16 for getattr and read.
    cdf_ops = [o for o in ("getattr", "read") if o in ops]
    if cdf_ops and "16x16" in cds:
        fig, axes = plt.subplots(1, len(cdf_ops), figsize=(6 * len(cdf_ops), 4), squeeze=False)
        any_line = False
        for i, op in enumerate(cdf_ops):
            ax = axes[0][i]
            for s in servers:
                c = cell.get((s, op, "16x16"))
                if not c or not c["ok"]:
                    continue
                # The repetition with the median calls/s.
                reps = sorted(c["ok"], key=lambda r: c["ok"][r]["cps"] or 0)
                data = c["data"][reps[len(reps) // 2]]
                pts = data.get("latency_cdf") or []
                pts = [(float(p[0]), float(p[1])) for p in pts if isinstance(p, (list, tuple)) and len(p) == 2 and p[0] > 0]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=s, drawstyle="steps-post", **style(s))
                    any_line = True
            ax.set_xscale("log")
            ax.set_title(f"{op}, 16 connections × 16 deep")
            ax.set_xlabel("latency (µs, log)")
            ax.set_ylabel("fraction of calls ≤ x")
            ax.set_ylim(0, 1.01)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize="small")
        fig.tight_layout()
        if any_line:
            save(plt, fig, results, "compare-latency-cdf.svg", names)
            made.append(("compare-latency-cdf.svg", "latency CDFs at 16x16"))
        else:
            plt.close(fig)

    # Hand-off histogram at 8 and 512 threads.
    if hist:
        thread_counts = sorted({t for _, t in hist})
        fig, axes = plt.subplots(1, len(thread_counts), figsize=(6.5 * len(thread_counts), 4), squeeze=False)
        for i, t in enumerate(thread_counts):
            ax = axes[0][i]
            policies = sorted({p for p, tt in hist if tt == t}, key=policy_rank)
            width = 0.8 / max(len(policies), 1)
            for k, pol in enumerate(policies):
                h = hist[(pol, t)]
                xs = [j + (k - (len(policies) - 1) / 2) * width for j in range(len(h["percent"]))]
                ax.bar(xs, h["percent"], width=width, label=pol)
            centres = hist[(policies[0], t)]["centres"]
            ax.set_xticks(range(len(centres)))
            ax.set_xticklabels([bin_label(c) for c in centres], rotation=45)
            ax.set_title(f"hand-off, {t} service threads (loopback NULL)")
            ax.set_xlabel("bin centre (ns), 300 ns bins")
            ax.set_ylabel("% of hand-offs")
            ax.grid(alpha=0.3, axis="y")
            ax.legend()
        fig.tight_layout()
        save(plt, fig, results, "compare-handoff.svg", names)
        made.append(("compare-handoff.svg", "scheduler hand-off histogram at 8 and 512 threads"))
    return made


# ---------------------------------------------------------------- sweeps

SWEEP_TITLES = {
    "threads-sched": "Service threads: `rnfs bench sched --mode loopback` (NULL hand-off)",
    "threads-load": "Service threads: `rnfs serve --threads N`, GETATTR at 16 connections × 16 deep",
    "conns": "Connections: 64 busy (GETATTR, 1 deep each) beside N idle",
    "dirs-lookup": "Directory size: LOOKUP of random names, 1 connection × 1 deep",
    "dirs-readdirplus": "Directory size: READDIRPLUS listing, 1 connection × 1 deep",
    "files-read": "File size: 4 KiB READ at random offsets, 16 × 16",
    "files-write": "File size: 4 KiB UNSTABLE WRITE at random offsets, 16 × 16",
    "exports-getattr": "Exports: GETATTR at 16 × 16 against the first and the last of N exports",
    "exports-lookup": "Exports: LOOKUP at 16 × 16 against the first and the last of N exports",
}


SWEEP_SHORT = {
    "threads-load": "threads (serve + load GETATTR 16×16)",
    "conns": "idle connections (64 busy GETATTR)",
    "dirs-lookup": "directory size, LOOKUP",
    "dirs-readdirplus": "directory size, READDIRPLUS",
    "files-read": "file size, READ 4K",
    "files-write": "file size, WRITE 4K",
    "exports-getattr": "exports, GETATTR",
    "exports-lookup": "exports, LOOKUP",
}

# Variants shown by another name than their own (the exports sweep's
# "first"/"last" read as "... export").
VARIANT_NAMES = {
    "cached": "answered from the caches: max age 3600 s",
}


def human(x, unit=""):
    x = float(x)
    for suffix, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)) if unit == "B" else (("M", 1e6), ("k", 1e3)):
        if x >= div and x % div == 0:
            return f"{x / div:g}{suffix}{'iB' if unit == 'B' else ''}"
    return f"{x:g}{unit if unit != 'B' else ' B'}"


def repetitions(runs, default):
    """How many repetitions each point had: one figure if every sweep had the
    same, else per sweep (reruns with --only may use another --repeat)."""
    by_sweep = {}
    for r in runs:
        rep = r.get("rep")
        if str(rep).isdigit():
            sweep = str(r["sweep"]).split("-")[0]
            by_sweep[sweep] = max(by_sweep.get(sweep, 0), int(rep))
    counts = set(by_sweep.values())
    if len(counts) <= 1:
        n = counts.pop() if counts else default
        return f"{n} repetition(s) per point"
    return "repetitions per point: " + ", ".join(f"{k} {v}" for k, v in by_sweep.items())


def sweeps_report(results, img_prefix):
    meta = load_json(os.path.join(results, "meta.json")) or {}
    runs = read_runs(results)
    lines = meta_lines(meta)
    p = meta.get("params", {})
    lines.append("")
    lines.append(
        f"Method: each point runs `rnfs bench load` for {p.get('warmup', '?')} s warm-up + "
        f"{p.get('duration', '?')} s measured against `rnfs serve` (release, lwq, local backend unless "
        f"said otherwise) on 127.0.0.1, {repetitions(runs, p.get('repeat', 1))} (medians "
        f"[min–max]). \"Largest / smallest\" divides a per-call figure (µs per call = 1/calls/s, latency, "
        f"CPU per call, time per entry) at the largest size by the same at the smallest: the issue's "
        f"target is at most 1.2x. The verdict is the medians'; \"best runs\" divides the best run at "
        f"each end (the highest calls/s, the lowest latency or CPU) the same way: on a shared VM a run "
        f"is slowed, never sped up, and the slow spells last tens of seconds, longer than a point, so "
        f"with few repetitions the medians at two ends can come from different spells.")
    lines.append("")
    commands = meta.get("commands") or [meta.get("command", "")]
    if len(commands) > 1:
        lines.append("Commands (the later ones reran some sweeps into the same results):")
        lines.append("")
    lines += ["```sh"] + commands + ["```"]
    lines.append("")
    notes = [n.get("text", "") if isinstance(n, dict) else str(n) for n in meta.get("notes", [])]
    for n in notes:
        lines.append(f"- {n}")
    if notes:
        lines.append("")

    plots = []
    summary = []

    def points(sweep, variant=None, augment=None):
        """{x: [metrics...]} of the successful runs; failed xs separately.
        augment(m) may add figures to each run's metrics (m has x and rep)."""
        ok, failed = {}, {}
        for r in runs:
            if r["sweep"] != sweep or (variant is not None and r.get("variant", "") != variant):
                continue
            x = float(r["x"])
            if r["ok"]:
                m = metrics(r["data"])
                extra = load_json(os.path.join(results, r["json"] + ".extra")) if r.get("json") else None
                if isinstance(extra, dict):
                    m.update(extra)
                m["data"] = r["data"]
                m["x"], m["rep"] = x, r.get("rep")
                if augment:
                    augment(m)
                ok.setdefault(x, []).append(m)
            else:
                failed.setdefault(x, []).append(r.get("note") or f"rc {r.get('rc')}")
        return ok, failed

    def per_call_ratio(ok, key, invert=False):
        xs = sorted(x for x in ok if med([m.get(key) for m in ok[x]]) is not None)
        if len(xs) < 2:
            return None, None, None
        lo = med([m.get(key) for m in ok[xs[0]]])
        hi = med([m.get(key) for m in ok[xs[-1]]])
        # The best run at each end (noise on a shared VM only slows a run).
        lo_best, hi_best = (best([m.get(key) for m in ok[x]], invert) for x in (xs[0], xs[-1]))
        if invert:
            lo, hi = (1 / lo if lo else None), (1 / hi if hi else None)
            lo_best, hi_best = (1 / lo_best if lo_best else None), (1 / hi_best if hi_best else None)
        return ratio(hi, lo), xs[0], xs[-1], ratio(hi_best, lo_best)

    def table(sweep, xname, xfmt, cols, variant=None, ratios=(), augment=None):
        """ratios: (label, key, invert[, in_summary]) per ratio line; in_summary
        (default True) also puts it in the summary table."""
        ok, failed = points(sweep, variant, augment)
        if not ok and not failed:
            return False
        shown = VARIANT_NAMES.get(variant, variant)
        title = SWEEP_TITLES.get(sweep, sweep) + (f" ({shown})" if variant else "")
        lines.append(f"#### {title}")
        lines.append("")
        lines.append(f"| {xname} | " + " | ".join(c[0] for c in cols) + " |")
        lines.append("|---:|" + "---:|" * len(cols))
        for x in sorted(set(ok) | set(failed)):
            ms = ok.get(x, [])
            cells = []
            for _, fn in cols:
                vals = [fn(m) for m in ms]
                vals = [v for v in vals if v is not None]
                cells.append(spread(vals) if vals else "-")
            note = f" FAILED: {'; '.join(failed[x])}" if x in failed else ""
            lines.append(f"| {xfmt(x)}{note} | " + " | ".join(cells) + " |")
        lines.append("")
        for label, key, invert, *in_summary in ratios:
            r, x0, x1, r_best = per_call_ratio(ok, key, invert)
            if r is not None:
                flat = "flat (≤ 1.2x)" if r <= 1.2 else "**not flat** (> 1.2x)"
                text = f"{label}: {xfmt(x1)} / {xfmt(x0)} = {r:.2f}x (best runs {fmt_best(r_best)}), {flat}"
                lines.append(f"- {text}")
                if in_summary and not in_summary[0]:
                    continue
                short = SWEEP_SHORT.get(sweep, sweep) + (
                    f" ({shown})" if variant in VARIANT_NAMES else f" ({variant} export)" if variant else "")
                summary.append(f"| {short} | {label} | {xfmt(x0)} → {xfmt(x1)} | {r:.2f}x | {fmt_best(r_best)} | {'yes' if r <= 1.2 else '**no**'} |")
        lines.append("")
        return True

    def num(key):
        return lambda m: m.get(key)

    std_cols = [("calls/s", num("cps")), ("p50 µs", num("p50")), ("p99 µs", num("p99")),
                ("server CPU µs/call", num("srv_cpu")), ("loadgen CPU µs/call", num("lg_cpu"))]

    # 1. Threads.
    lines.append("### Service threads 8 → 4096")
    lines.append("")
    sched = load_json(os.path.join(results, "threads", "sched.json"))
    if isinstance(sched, list) and sched:
        by = {}
        for r in sched:
            if isinstance(r, dict) and r.get("mode") == "loopback":
                by.setdefault((str(r.get("policy")), r.get("threads")), []).append(r)
        lines.append(f"#### {SWEEP_TITLES['threads-sched']}")
        lines.append("")
        lines += command_block({"command": meta.get("sched_command", "")})
        lines.append("")
        lines.append("| policy | threads | calls/s | hand-off p50 ns | hand-off p99 ns | mean ns |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for (pol, t) in sorted(by, key=lambda k: (policy_rank(k[0]), k[1])):
            rs = by[(pol, t)]
            lines.append(f"| {pol} | {t} | {spread([r.get('calls_per_sec') for r in rs])} | "
                         f"{spread([get(r, 'handoff', 'p50') for r in rs])} | {spread([get(r, 'handoff', 'p99') for r in rs])} | "
                         f"{spread([get(r, 'handoff', 'mean') for r in rs])} |")
        lines.append("")
        for pol in sorted({k[0] for k in by}, key=policy_rank):
            ts = sorted(t for p_, t in by if p_ == pol)
            if len(ts) < 2:
                continue
            lo, hi = by[(pol, ts[0])], by[(pol, ts[-1])]
            def both(f, higher_is_better=False):
                """(ratio of the medians, ratio of the best runs), largest over smallest
                per call: for a rate (higher_is_better), smallest over largest."""
                a, b = [f(r) for r in hi], [f(r) for r in lo]
                if higher_is_better:
                    a, b = b, a
                return ratio(med(a), med(b)), ratio(best(a, higher_is_better), best(b, higher_is_better))
            r_cps = both(lambda r: r.get("calls_per_sec"), True)
            r_p50 = both(lambda r: get(r, "handoff", "p50"))
            r_p99 = both(lambda r: get(r, "handoff", "p99"))
            for label, (rv, rb) in (("µs per call (1/calls/s)", r_cps), ("hand-off p50", r_p50), ("hand-off p99", r_p99)):
                if rv is not None:
                    lines.append(f"- {pol} {label}: {ts[-1]} / {ts[0]} threads = {rv:.2f}x (best runs {fmt_best(rb)})")
                    summary.append(f"| sched loopback {pol} | {label} | {ts[0]} → {ts[-1]} threads | {rv:.2f}x | {fmt_best(rb)} | {'yes' if rv <= 1.2 else '**no**'} |")
        lines.append("")
    ratios_std = (("µs per call (1/calls/s)", "cps", True), ("p50 latency", "p50", False),
                  ("p99 latency", "p99", False), ("server CPU per call", "srv_cpu", False))
    table("threads-load", "threads", lambda x: f"{x:g}", std_cols, ratios=ratios_std)

    # 2. Connections.
    lines.append("### Connections: 64 busy + N idle")
    lines.append("")

    def rss_growth(m):
        before, end = m.get("rss_kib_before"), m.get("rss_end")
        return None if before is None or end is None else (end - before) * 1024.0

    # What the 64 busy connections alone add (the 0-idle points), taken off.
    ok0, _ = points("conns")
    busy_growth = med([rss_growth(m) for m in ok0.get(0.0, [])]) or 0.0

    def rss_per_conn(m):
        idle = get(m.get("data"), "idle_connections")
        growth = rss_growth(m)
        if not idle or growth is None:
            return None
        return (growth - busy_growth) / idle

    conn_cols = [("busy calls/s", num("cps")), ("busy p50 µs", num("p50")), ("busy p99 µs", num("p99")),
                 ("server CPU µs/call", num("srv_cpu")), ("server RSS before MiB", lambda m: (m.get("rss_kib_before") or 0) / 1024 or None),
                 ("server RSS end MiB", lambda m: (m.get("rss_end") or 0) / 1024 or None),
                 ("server RSS per idle connection, bytes", rss_per_conn)]
    table("conns", "idle connections", lambda x: f"{x:,.0f}".replace(",", " "), conn_cols,
          ratios=(("busy p50 latency", "p50", False), ("busy p99 latency", "p99", False),
                  ("server CPU per call", "srv_cpu", False)))

    # 3. Directory size.
    lines.append("### Directory size 1,000 → 1,000,000")
    lines.append("")
    table("dirs-lookup", "entries", lambda x: f"{x:,.0f}".replace(",", " "), std_cols,
          ratios=(("LOOKUP p50 latency", "p50", False), ("LOOKUP p99 latency", "p99", False),
                  ("server CPU per LOOKUP", "srv_cpu", False)))

    def local_figure(sweep, key):
        """{(x, rep): figure} of a local baseline's runs (`rnfs bench fileio|dirio`)."""
        out = {}
        for r in runs:
            if r["sweep"] == sweep and r["ok"]:
                v = get(r["data"], key)
                if v is not None:
                    out[(float(r["x"]), r.get("rep"))] = v
        return out

    def failed_local(sweep, what, xfmt):
        bad = [r for r in runs if r["sweep"] == sweep and not r["ok"]]
        for r in bad:
            lines.append(f"- local baseline {what} {xfmt(float(r['x']))} r{r.get('rep')} FAILED: "
                         f"{r.get('note') or 'rc ' + str(r.get('rc'))}")
        if bad:
            lines.append("")

    def with_local(local, server_key, local_key, own_key):
        """Pairs each run with the local baseline of the same point and
        repetition: m[local_key], and m[own_key] = server - local."""
        def augment(m):
            lc = local.get((m["x"], m["rep"]))
            m[local_key] = lc
            m[own_key] = None if lc is None or m.get(server_key) is None else m[server_key] - lc
        return augment

    entries_fmt = lambda x: f"{x:,.0f}".replace(",", " ")
    dirs_local = local_figure("dirs-local-readdirplus", "cpu_ns_per_entry")
    if dirs_local:
        lines.append("Local CPU ns/entry is `rnfs bench dirio` listing the same directory right after the "
                     "point, with no NFS (getdents64, one fstatat per entry): what the kernel charges a "
                     "listing with current attributes, which a server that stats every entry pays in full. "
                     "rnfs answers most entries from its caches (attributes inotify keeps current, for at "
                     "most the max age) and pays it only for the entries it reads again, so its CPU per "
                     "entry is below the kernel's and no difference is taken.")
        lines.append("")
    failed_local("dirs-local-readdirplus", "dirio", entries_fmt)
    dirs_rdp_cols = (
        [("pages/s", num("cps")), ("entries/s", num("entries_per_s")), ("p50 µs per page", num("p50")),
         ("ns per entry (1/entries/s)", num("ns_per_entry")), ("latency ns per entry", num("lat_ns_per_entry")),
         ("server CPU ns per entry", num("srv_cpu_ns_per_entry")), ("loadgen CPU µs/call", num("lg_cpu"))]
        + ([("local CPU ns/entry", num("local_cpu"))] if dirs_local else []))
    for variant, local_ratio in (("", True), ("cached", False)):
        ratios = [("READDIRPLUS time per entry", "ns_per_entry", False),
                  ("READDIRPLUS server CPU per entry", "srv_cpu_ns_per_entry", False)]
        if local_ratio:
            ratios.append(("local CPU per entry (the kernel alone, no NFS)", "local_cpu", False, False))
        table("dirs-readdirplus", "entries", entries_fmt, dirs_rdp_cols, variant=variant,
              ratios=ratios, augment=with_local(dirs_local, "srv_cpu_ns_per_entry", "local_cpu", "own_cpu"))

    # 4. File size.
    lines.append("### File size 1 MiB → 8 GiB")
    lines.append("")
    if any(r["sweep"].startswith("files-local-") for r in runs):
        lines.append("rnfs's own cost per call = server CPU µs/call − local CPU µs/op, where local is "
                     "`rnfs bench fileio` doing the same 4 KiB I/O on the same file right after the point, "
                     "with no NFS (16 threads; an fsync every 256 writes per thread as the COMMITs): what the "
                     "kernel costs (page cache, holes, block allocation) is in both and cancels out. Paired by "
                     "repetition; rnfs is flat if that difference is.")
        lines.append("")

    for op in ("read", "write"):
        failed_local(f"files-local-{op}", op, lambda x: human(x, "B"))

    for op in ("read", "write"):
        table(f"files-{op}", "file size", lambda x: human(x, "B"),
              [("calls/s", num("cps")), ("MB/s", num("mbps"))] + std_cols[1:]
              + [("local CPU µs/op", num("local_cpu")), ("rnfs own µs/call (server CPU - local)", num("own_cpu"))],
              ratios=(("µs per call (1/calls/s)", "cps", True), ("p99 latency", "p99", False),
                      ("server CPU per call", "srv_cpu", False),
                      ("local CPU per op (the kernel alone, no NFS)", "local_cpu", False, False),
                      ("server CPU per call minus local CPU per op (rnfs's own)", "own_cpu", False)),
              augment=with_local(local_figure(f"files-local-{op}", "cpu_us_per_op"),
                                 "srv_cpu", "local_cpu", "own_cpu"))

    # 5. Exports.
    lines.append("### Exports 1 → 1,000")
    lines.append("")
    for op in ("getattr", "lookup"):
        for variant in ("first", "last"):
            table(f"exports-{op}", "exports", lambda x: f"{x:g}", std_cols, variant=variant,
                  ratios=(("µs per call (1/calls/s)", "cps", True), ("p99 latency", "p99", False),
                          ("server CPU per call", "srv_cpu", False)))

    if summary:
        body = ["### Summary: largest / smallest, per call", "",
                "| sweep | figure | range | ratio | best runs | flat (≤ 1.2x)? |", "|---|---|---|---:|---:|---|"] + summary + [""]
        # Summary first, after the method.
        idx = next((i for i, l in enumerate(lines) if l.startswith("### Service threads")), len(lines))
        lines[idx:idx] = body

    made = sweeps_plots(results, runs, sched)
    if made:
        lines.append("### Plots")
        lines.append("")
        for name, title in made:
            lines.append(f"![{title}]({img_prefix}{name})")
            lines.append("")
    return "\n".join(lines), [n for n, _ in made], meta


def sweeps_plots(results, runs, sched):
    plt = plotting()
    if plt is None:
        return []
    made, names = [], []

    def curve(ax, sweep, key, label, variant=None, transform=None):
        pts = {}
        for r in runs:
            if r["sweep"] != sweep or not r["ok"] or (variant is not None and r.get("variant", "") != variant):
                continue
            m = metrics(r["data"])
            v = transform(m, r) if transform else m.get(key)
            if v is not None:
                pts.setdefault(float(r["x"]), []).append(v)
        if not pts:
            return False
        xs = sorted(pts)
        ys = [statistics.median(pts[x]) for x in xs]
        ax.plot(xs, ys, marker="o", label=label)
        return True

    def finish(fig, axes, name, title, xlabel, logx=True):
        for ax in axes:
            if logx:
                ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylim(bottom=0)
            ax.set_ylim(top=ax.get_ylim()[1] * 1.08)  # a flat line at the top stays visible
            ax.grid(alpha=0.3, which="both")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
        fig.suptitle(title)
        fig.tight_layout()
        save(plt, fig, results, name, names)
        made.append((name, title))

    # Threads.
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    any_ = False
    if isinstance(sched, list):
        by = {}
        for r in sched:
            if isinstance(r, dict) and r.get("mode") == "loopback":
                by.setdefault(str(r.get("policy")), {}).setdefault(r.get("threads"), []).append(r)
        for pol, d in sorted(by.items(), key=lambda kv: policy_rank(kv[0])):
            ts = sorted(d)
            axes[0].plot(ts, [med([r.get("calls_per_sec") for r in d[t]]) for t in ts], marker="o", label=f"sched {pol}")
            axes[1].plot(ts, [med([get(r, "handoff", "p50") for r in d[t]]) for t in ts], marker="o", label=f"{pol} p50")
            axes[1].plot(ts, [med([get(r, "handoff", "p99") for r in d[t]]) for t in ts], marker="x", ls="--", label=f"{pol} p99")
            any_ = True
    any_ |= curve(axes[0], "threads-load", "cps", "serve + load GETATTR 16×16")
    any_ |= curve(axes[2], "threads-load", "p50", "GETATTR p50")
    curve(axes[2], "threads-load", "p99", "GETATTR p99")
    axes[0].set_ylabel("calls/s")
    axes[1].set_ylabel("hand-off ns")
    axes[2].set_ylabel("latency µs")
    if any_:
        finish(fig, axes, "sweep-threads.svg", "Service threads 8 → 4096", "service threads (log)")
    else:
        plt.close(fig)

    # Connections.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if curve(axes[0], "conns", "p50", "busy GETATTR p50"):
        curve(axes[0], "conns", "p99", "busy GETATTR p99")
        axes[0].set_ylabel("latency µs")

        def growth(r):
            extra = load_json(os.path.join(results, r["json"] + ".extra")) or {}
            end = get(r["data"], "server", "rss_kib_end")
            return None if extra.get("rss_kib_before") is None or end is None else (end - extra["rss_kib_before"]) * 1024.0

        busy = med([growth(r) for r in runs if r["sweep"] == "conns" and r["ok"] and float(r["x"]) == 0]) or 0.0

        def rss(m, r):
            idle, g = get(r["data"], "idle_connections"), growth(r)
            return None if not idle or g is None else (g - busy) / idle
        curve(axes[1], "conns", None, "server RSS per idle connection", transform=rss)
        axes[1].set_ylabel("bytes")
        # x = 0 idle cannot go on a log axis: symlog.
        for ax in axes:
            ax.set_xscale("symlog", linthresh=100)
        finish(fig, axes, "sweep-connections.svg", "Connections: 64 busy + N idle", "idle connections (symlog)", logx=False)
    else:
        plt.close(fig)

    # Directory size.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    a = curve(axes[0], "dirs-lookup", "p50", "LOOKUP p50")
    b = curve(axes[1], "dirs-readdirplus", "ns_per_entry", "READDIRPLUS ns per entry (1/entries/s)",
              variant="")
    curve(axes[1], "dirs-readdirplus", "srv_cpu_ns_per_entry", "READDIRPLUS server CPU ns per entry",
          variant="")
    curve(axes[1], "dirs-readdirplus", "srv_cpu_ns_per_entry",
          "READDIRPLUS server CPU ns per entry, answered from the caches (max age 3600 s)",
          variant="cached")
    curve(axes[1], "dirs-local-readdirplus", None, "local getdents + fstatat CPU ns per entry (no NFS)",
          transform=lambda m, r: get(r["data"], "cpu_ns_per_entry"))
    if a or b:
        curve(axes[0], "dirs-lookup", "p99", "LOOKUP p99")
        axes[0].set_ylabel("latency µs")
        axes[1].set_ylabel("ns per entry")
        finish(fig, axes, "sweep-dirs.svg", "Directory size", "entries (log)")
    else:
        plt.close(fig)

    # File size.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    a = curve(axes[0], "files-read", "cps", "READ 4K")
    b = curve(axes[0], "files-write", "cps", "WRITE 4K")
    if a or b:
        curve(axes[1], "files-read", "p99", "READ p99")
        curve(axes[1], "files-write", "p99", "WRITE p99")
        axes[0].set_ylabel("calls/s")
        axes[1].set_ylabel("latency µs")
        finish(fig, axes, "sweep-files.svg", "File size 1 MiB → 8 GiB (random 4 KiB offsets)", "file size, bytes (log)")
    else:
        plt.close(fig)

    # Exports.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    any_ = False
    for op in ("getattr", "lookup"):
        for v in ("first", "last"):
            any_ |= curve(axes[0], f"exports-{op}", "cps", f"{op} ({v} export)", variant=v)
            curve(axes[1], f"exports-{op}", "srv_cpu", f"{op} ({v} export)", variant=v)
    if any_:
        axes[0].set_ylabel("calls/s")
        axes[1].set_ylabel("server CPU µs/call")
        finish(fig, axes, "sweep-exports.svg", "Exports 1 → 1,000", "exports (log)")
    else:
        plt.close(fig)
    return made


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["compare", "sweeps", "line"])
    ap.add_argument("results", help="results directory (line: one JSON file)")
    ap.add_argument("--docs", help="markdown file whose marked section is replaced")
    ap.add_argument("--img-dir", help="where the plots are copied with --docs")
    ap.add_argument("--title", help="section heading")
    a = ap.parse_args()

    if a.kind == "line":
        data = load_json(a.results)
        if not isinstance(data, dict):
            print("no result")
            return 0
        if data.get("tool") == "rnfs-bench-fileio":
            print(f"local {fmt(get(data, 'ops_per_s'))} ops/s, p50 {fmt(get(data, 'latency_us', 'p50'))} us, "
                  f"p99 {fmt(get(data, 'latency_us', 'p99'))} us, CPU {fmt(get(data, 'cpu_us_per_op'))} us/op")
            return 0
        if data.get("tool") == "rnfs-bench-dirio":
            print(f"local {fmt(get(data, 'entries_per_s'))} entries/s, {fmt(get(data, 'ns_per_entry'))} ns/entry, "
                  f"CPU {fmt(get(data, 'cpu_ns_per_entry'))} ns/entry")
            return 0
        m = metrics(data)
        print(f"{fmt(m['cps'])} calls/s, p50 {fmt(m['p50'])} us, p99 {fmt(m['p99'])} us, "
              f"server {fmt(m['srv_cpu'])} us/call, loadgen {fmt(m['lg_cpu'])} us/call, errors {m['errors']}")
        return 0
    fn = compare_report if a.kind == "compare" else sweeps_report
    out = "report.md" if a.kind == "compare" else "sweeps.md"
    date = (load_json(os.path.join(a.results, "meta.json")) or {}).get("date", "")
    default_title = {
        "compare": f"## rnfs vs nfs-ganesha side by side (`bench/compare`), {date}",
        "sweeps": f"## Scaling sweeps (`bench/sweeps`), {date}",
    }[a.kind]
    title = a.title or default_title
    body, plots, _ = fn(a.results, "")
    with open(os.path.join(a.results, out), "w") as f:
        f.write(title + "\n\n" + body + "\n")
    print(os.path.join(a.results, out))
    if a.docs:
        img_dir = a.img_dir or os.path.join(os.path.dirname(os.path.abspath(a.docs)), "img")
        os.makedirs(img_dir, exist_ok=True)
        for name in plots:
            shutil.copy(os.path.join(a.results, name), os.path.join(img_dir, name))
        rel = os.path.relpath(img_dir, os.path.dirname(os.path.abspath(a.docs)))
        body, _, _ = fn(a.results, rel.rstrip("/") + "/")
        splice_docs(a.docs, a.kind, title + "\n\n" + body)
        print(f"{a.docs}: section {a.kind} replaced; plots in {img_dir}")


if __name__ == "__main__":
    sys.exit(main())
