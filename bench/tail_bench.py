#!/usr/bin/env python3
"""Tail latency on natural traffic (issue 14): P99 against offered rate for every system, with
repeats, so that a difference smaller than the noise is not reported as a result.

What it measures, in one run on one machine:
  1. the engine ceiling for each workload (`tailcut bench-engine`, no server: the best batch
     per token length, combined over the workload's length histogram; run_bench's method);
  2. a ladder of fixed open-loop rates (Poisson arrivals, tailcut-loadgen), each step measured
     for every system in turn, the systems' order rotated from repeat to repeat, so a machine
     that slows down during the run penalises every system alike. Every server stays up for the
     whole run (one at a time is loaded; the others idle); no text is sent twice to a system
     within a run (each step starts where the last one ended);
  3. per system and repeat, the max rate: the highest rate of the ladder below the first step
     that failed (P99 of every request, from scheduled send time, > 86 ms or more than 0.1 %
     of requests not answered 200). Reported: the median over repeats and the spread
     (min..max);
  4. overload: each system at 1.25 x its median max rate, the same repeats: the P99 of the
     admitted (200) requests and the share refused with 429.

Writes bench/results/tail-<date>.json and tail-<date>-<workload>.png (P99 against offered
rate, median of the repeats, the spread as a band).

Usage: .venv-bench/bin/python bench/tail_bench.py [--workloads natural] [--rates 100,150,200]
         [--repeats 3] [--systems tailcut,tailcut-w2,python-async]
         [--variant 'NAME=--threads 1 --batching.num_workers 2'] [--server-cpus 0]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_bench as rb  # noqa: E402  (servers, load steps, the engine ceiling, the machine note)

OVERLOAD_FACTOR = 1.25
DEFAULT_RATES = {"natural": [100, 140, 180, 220, 260, 300, 350, 390, 430, 470],
                 "short": [200, 260, 320, 380, 440, 500], "medium": [20, 30, 40, 50, 60, 70],
                 "mixed": [30, 45, 60, 75, 90, 110], "zipf": [150, 200, 250, 300, 350, 400]}


def tailcut_variant(base: rb.System, name: str, extra: str) -> rb.System:
    return rb.System(f"tailcut[{name}]", f"tailcut [{name}]", f"{base.settings}; then {extra}",
                     lambda port, base=base, extra=extra: [*base.argv(port), *shlex.split(extra)], base.env)


def pinned(base: rb.System, cpus: str) -> rb.System:
    """`base` with its server confined to `cpus` (taskset): a machine with fewer cores."""
    return rb.System(base.key, base.label, f"{base.settings}; server on CPUs {cpus} (taskset)",
                     lambda port, base=base: ["taskset", "-c", cpus, *base.argv(port)], base.env)


def summarise(steps: list[dict], rates: list[float]) -> dict:
    """Per system: the max rate per repeat (highest rate below the first failure) and P99 per rate."""
    by_rep: dict[int, dict[float, dict]] = {}
    for s in steps:
        by_rep.setdefault(s["repeat"], {})[s["offered_rate"]] = s
    max_rates = []
    for rep in sorted(by_rep):
        best = 0.0
        for r in rates:
            st = by_rep[rep].get(r)
            if st is None or not st["passed"]:
                break
            best = r
        max_rates.append(best)
    per_rate = {}
    for r in rates:
        p99 = [by_rep[k][r]["p99_ms"] for k in by_rep if r in by_rep[k] and by_rep[k][r]["p99_ms"] is not None]
        err = [by_rep[k][r]["error_rate"] for k in by_rep if r in by_rep[k]]
        if p99:
            per_rate[f"{r:g}"] = {"p99_ms_median": round(statistics.median(p99), 1), "p99_ms_min": min(p99),
                                "p99_ms_max": max(p99), "error_rate_median": statistics.median(err),
                                "passed": sum(by_rep[k][r]["passed"] for k in by_rep if r in by_rep[k])}
    return {"max_rate_per_repeat": max_rates, "max_rate_median": statistics.median(max_rates) if max_rates else 0.0,
            "max_rate_spread": [min(max_rates), max(max_rates)] if max_rates else None, "per_rate": per_rate}


def plot(result: dict, workload: str, path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, summ in result["summary"][workload].items():
        xs = sorted(float(r) for r in summ["per_rate"])
        med = [summ["per_rate"][f"{x:g}"]["p99_ms_median"] for x in xs]
        lo = [summ["per_rate"][f"{x:g}"]["p99_ms_min"] for x in xs]
        hi = [summ["per_rate"][f"{x:g}"]["p99_ms_max"] for x in xs]
        line, = ax.plot(xs, med, marker="o", label=f"{key} (max {summ['max_rate_median']:g}/s)")
        ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color())
    ax.axhline(rb.SLO_MS, color="grey", linestyle="--", linewidth=1)
    ceil = (result.get("engine_ceiling") or {}).get("per_workload", {}).get(workload, {}).get("sequences_per_s")
    if ceil:
        ax.axvline(ceil, color="black", linestyle=":", linewidth=1, label=f"engine ceiling {ceil:.0f} seq/s")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (req/s, Poisson)")
    ax.set_ylabel("P99 latency (ms; median of repeats, band = min..max)")
    ax.set_title(f"'{workload}' workload: P99 against offered rate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="natural")
    ap.add_argument("--rates", default=None, help="comma-separated ladder (default: per workload)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0, help="measured seconds per step")
    ap.add_argument("--warmup", type=float, default=1.0, help="unrecorded seconds before each step")
    ap.add_argument("--systems", default="tailcut,python-async")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="add system tailcut[NAME]: tailcut with extra arguments")
    ap.add_argument("--server-cpus", default=None, metavar="LIST",
                    help="run every server under taskset -c LIST (e.g. 0: one core; the load generator is not pinned)")
    ap.add_argument("--no-overload", action="store_true")
    ap.add_argument("--no-ceiling", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    args.python_arg, args.python_variant, args.torch_python = [], [], None  # what rb.systems reads

    workloads = args.workloads.split(",")
    stamp = dt.datetime.now().astimezone().strftime("%Y-%m-%d-%H%M")
    rb.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out_path = args.out or rb.RESULTS_DIR / f"tail-{stamp}.json"
    tmp = rb.RESULTS_DIR / f"tail-{stamp}.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    versions = rb.snapshot_binaries(tmp)
    wl_meta = json.loads((rb.WORKLOADS_DIR / "workloads.json").read_text())["workloads"]
    for w in workloads:
        if w not in wl_meta:
            sys.exit(f"tail_bench: workload {w!r} missing: run bench/setup.sh")
    all_systems = rb.systems(args, rb.fp32_repository(tmp))
    for v in args.variant:
        name, _, extra = v.partition("=")
        s = tailcut_variant(all_systems["tailcut"], name, extra)
        all_systems[s.key] = s
    keys = args.systems.split(",") + [f"tailcut[{v.partition('=')[0]}]" for v in args.variant]
    keys = list(dict.fromkeys(keys))
    unknown = [k for k in keys if k not in all_systems]
    if unknown:
        sys.exit(f"tail_bench: unknown systems {unknown}; known: {list(all_systems)}")
    if args.server_cpus:
        all_systems = {k: pinned(v, args.server_cpus) for k, v in all_systems.items()}

    result: dict = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": "bench/tail_bench.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "machine": rb.machine_note(), "versions": versions, "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "settings": {"slo_p99_ms": rb.SLO_MS, "max_error_rate": rb.MAX_ERROR_RATE, "repeats": args.repeats,
                     "duration_s": args.duration, "warmup_s": args.warmup, "overload_factor": OVERLOAD_FACTOR},
        "systems": {k: {"label": all_systems[k].label, "settings": all_systems[k].settings,
                        "argv": all_systems[k].argv(0)} for k in keys},
        "workloads": {w: {k: v for k, v in wl_meta[w].items() if k != "length_histogram"} for w in workloads},
        "engine_ceiling": None, "steps": {}, "summary": {}, "overload": {},
    }
    t0 = time.monotonic()
    servers: dict[str, rb.Server] = {}
    try:
        if not args.no_ceiling:
            rb.log("tail_bench: engine ceiling")
            cfg = {"ceiling_batches": [1, 4, 8, 16, 32, 64], "ceiling_seconds": 1.0}
            result["engine_ceiling"] = rb.engine_ceiling(cfg, wl_meta, workloads)
            for w, c in result["engine_ceiling"]["per_workload"].items():
                rb.log(f"    {w:8} {c['sequences_per_s']:8.1f} seq/s")
        for k in keys:
            servers[k] = rb.Server(all_systems[k], tmp / f"{k}.log")
            servers[k].start()
        line: dict[tuple[str, str], int] = {}
        for w in workloads:
            wl_path = rb.WORKLOADS_DIR / f"{w}.jsonl"
            probe = wl_path.open().readline().encode()
            rates = [float(r) for r in args.rates.split(",")] if args.rates else [float(r) for r in DEFAULT_RATES[w]]
            for k in keys:  # warm every server on this workload
                rb.run_loadgen(servers[k], wl_path, rates[0], 0.0, 2.0, 0, tmp / f"{w}-{k}-warm.json", seed=99)
                servers[k].settle(probe)
            steps: dict[str, list[dict]] = {k: [] for k in keys}

            def step(k: str, rate: float, rep: int, tag: str) -> dict:
                srv = servers[k]
                out = tmp / f"{w}-{k}-{tag}-{rate:g}-{rep}.json"
                rep_json = rb.run_loadgen(srv, wl_path, rate, args.warmup, args.duration, line.get((w, k), 0), out,
                                          seed=1000 * rep + int(rate))
                line[(w, k)] = rep_json.get("next_line", 0)
                s = rb.judge(rep_json)
                s["repeat"] = rep
                ok = rep_json.get("ok_latency_ms") or {}
                s["ok_p99_ms"] = ok.get("p99")
                s["refused_429"] = rep_json.get("status_counts", {}).get("429", 0)
                rb.log(f"  {w} rep {rep} {k:22} {rate:7.1f}/s p50 {rb.fmt_ms(s['p50_ms'])} p99 "
                       f"{rb.fmt_ms(s['p99_ms'])} ok-p99 {rb.fmt_ms(s['ok_p99_ms'])} errors {s['error_rate']:.2%} "
                       f"{'pass' if s['passed'] else 'FAIL'}")
                if not srv.alive():
                    raise RuntimeError(f"{k} died:\n{srv.log_tail()}")
                srv.settle(probe)
                return s

            for rep in range(args.repeats):
                order = keys[rep % len(keys):] + keys[: rep % len(keys)]
                failed: set[str] = set()
                for rate in rates:
                    for k in order:
                        if k in failed:
                            continue  # past its first failure this repeat: higher rates only fail more
                        s = step(k, rate, rep, "ladder")
                        steps[k].append(s)
                        if not s["passed"]:
                            failed.add(k)
                    if len(failed) == len(keys):
                        break
            result["steps"][w] = steps
            result["summary"][w] = {k: summarise(steps[k], rates) for k in keys}
            if not args.no_overload:
                over: dict[str, list[dict]] = {k: [] for k in keys}
                for rep in range(args.repeats):
                    for k in keys:
                        m = result["summary"][w][k]["max_rate_median"]
                        if m > 0:
                            over[k].append(step(k, m * OVERLOAD_FACTOR, rep, "overload"))
                result["overload"][w] = {
                    k: {"rate": v[0]["offered_rate"],
                        "ok_p99_ms_median": statistics.median(s["ok_p99_ms"] for s in v if s["ok_p99_ms"] is not None),
                        "ok_p99_ms_spread": [min(s["ok_p99_ms"] for s in v), max(s["ok_p99_ms"] for s in v)],
                        "refused_share_median": statistics.median(s["refused_429"] / max(1, s["sent"]) for s in v),
                        "steps": v} for k, v in over.items() if v}
            ceil = ((result["engine_ceiling"] or {}).get("per_workload", {}).get(w, {}) or {}).get("sequences_per_s")
            for k, summ in result["summary"][w].items():
                if ceil:
                    summ["vs_ceiling"] = round(summ["max_rate_median"] / ceil, 3)
                rb.log(f"tail_bench: {w} {k}: max rate median {summ['max_rate_median']:g}/s "
                       f"(per repeat {summ['max_rate_per_repeat']})" + (f", {summ['vs_ceiling']:.2f} of the ceiling"
                                                                         if ceil else ""))
                o = result["overload"].get(w, {}).get(k)
                if o:
                    rb.log(f"    at {o['rate']:g}/s: admitted P99 {o['ok_p99_ms_median']:.0f} ms "
                           f"{o['ok_p99_ms_spread']}, refused {o['refused_share_median']:.1%}")
    finally:
        for s in servers.values():
            s.stop()
        rb.stop_all()
        import shutil  # noqa: PLC0415

        shutil.rmtree(tmp / "bin", ignore_errors=True)
    result["elapsed_s"] = round(time.monotonic() - t0, 1)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    rb.log(f"tail_bench: wrote {out_path.relative_to(rb.REPO)} in {result['elapsed_s'] / 60:.1f} min")
    for w in workloads:
        if result["summary"].get(w):
            png = out_path.with_name(f"{out_path.stem}-{w}.png")
            plot(result, w, png)
            rb.log(f"tail_bench: plot {png.relative_to(rb.REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
