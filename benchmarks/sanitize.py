"""Every kernel path of tilegraph under NVIDIA compute-sanitizer, on a GPU machine.

    python benchmarks/sanitize.py [--tool memcheck racecheck] [--files test_add.py ...]
                                  [--budget SECONDS] [--out DIR]

Runs the kernel tests on the GPU inside compute-sanitizer, one process per test file: each
op in each dtype at awkward sizes, every matrix-vector and GEMM candidate forced in turn,
the decode layer with and without programmatic dependent launch, the backward kernels, the
decode attention's split over the sequence. memcheck finds out-of-bounds and misaligned
accesses; racecheck, shared-memory hazards (run on the kernels that share data between
warps). Prints a table of errors per file and saves it as JSON; exits 1 if any file had an
error or a failing test. Files not reached within --budget are listed as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL_TESTS = ("test_add.py", "test_gelu.py", "test_softmax.py", "test_rms_norm.py",
                "test_linear.py", "test_matmul.py", "test_decode_layer.py",
                "test_decode_plan.py", "test_decode_attention.py", "test_rotary.py",
                "test_linear_qkv.py", "test_greedy.py", "test_autograd.py")
# Kernels that exchange data through shared memory or atomics across warps or programs.
RACE_TESTS = ("test_decode_attention.py", "test_decode_layer.py", "test_matmul.py",
              "test_softmax.py", "test_rms_norm.py")


def run_file(tool: str, test_file: str, timeout: float) -> dict:
    command = ["compute-sanitizer", "--tool", tool, "--print-limit", "20",
               sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               str(ROOT / "tests" / test_file)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "file": test_file, "status": "timed out", "errors": None,
                "seconds": round(time.perf_counter() - start, 1)}
    output = done.stdout + done.stderr
    # memcheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: M
    # hazards displayed (N errors, K warnings)".
    summary = re.findall(r"ERROR SUMMARY: (\d+) error|hazards displayed \((\d+) error",
                         output)
    summary = [memcheck or racecheck for memcheck, racecheck in summary]
    # pytest's last line: "3 passed, 1 failed, 1 error in 2.50s"
    outcome = re.findall(r"^.*\d+ (?:passed|failed|errors?|skipped).* in [\d.]+s", output,
                         re.MULTILINE)
    tests = re.findall(r"(\d+) (passed|failed|skipped|errors?)", outcome[-1] if outcome else "")
    errors = sum(int(n) for n in summary) if summary else None
    failed = not tests or any(kind != "passed" and kind != "skipped" and int(n)
                              for n, kind in tests)
    status = ("sanitizer said nothing" if errors is None else
              "errors" if errors else "tests failed" if failed else "clean")
    return {"tool": tool, "file": test_file, "status": status, "errors": errors,
            "tests": " ".join(f"{n} {kind}" for n, kind in tests),
            "seconds": round(time.perf_counter() - start, 1),
            "report": "" if status == "clean" else output[-4000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tool", nargs="+", choices=("memcheck", "racecheck"),
                        default=["memcheck", "racecheck"])
    parser.add_argument("--files", nargs="+", help="test files (default: the kernel tests; "
                        "for racecheck, those of kernels sharing data between warps)")
    parser.add_argument("--budget", type=float, default=3600.0,
                        help="seconds for all runs; later files are listed as not run")
    parser.add_argument("--out", type=Path, help="folder for sanitize.json")
    args = parser.parse_args()
    if shutil.which("compute-sanitizer") is None:
        print("compute-sanitizer is not on PATH (it comes with the CUDA toolkit)")
        return 2
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        print(f"--out {args.out} is a file, not a folder")
        return 2
    plan = [(tool, f) for tool in args.tool
            for f in (args.files or (KERNEL_TESTS if tool == "memcheck" else RACE_TESTS))]
    deadline = time.perf_counter() + args.budget
    results = []
    for index, (tool, test_file) in enumerate(plan, 1):
        left = deadline - time.perf_counter()
        if left < 30:
            results.append({"tool": tool, "file": test_file, "status": "not run (budget)",
                            "errors": None, "seconds": 0})
            continue
        print(f"[{index}/{len(plan)}] {tool} {test_file} ...", flush=True)
        result = run_file(tool, test_file, left)
        results.append(result)
        print(f"    {result['status']}, errors {result['errors']}, {result.get('tests', '')}, "
              f"{result['seconds']} s", flush=True)
        if result.get("report"):
            print(result["report"][-1500:], flush=True)
    print(f"\n{'tool':10} {'file':28} {'status':24} {'errors':>6} {'seconds':>8}")
    for r in results:
        print(f"{r['tool']:10} {r['file']:28} {r['status']:24} {str(r['errors']):>6} "
              f"{r['seconds']:>8}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sanitize.json").write_text(json.dumps(
            {"command": " ".join(sys.argv), "results": results}, indent=1))
    bad = [r for r in results if r["status"] not in ("clean", "not run (budget)")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
