"""Temporary: where the stopped-rank and missing-peer cases spend their time, per rank."""
import faulthandler
import sys
import time

sys.path.insert(0, "tests")
T0 = time.monotonic()


def say(*what):
    print(f"[{time.monotonic() - T0:6.1f}]", *what, file=sys.stderr, flush=True)


def give_up(timeout):
    faulthandler.dump_traceback_later(15, repeat=True)
    import test_tensor_parallel as t
    say("give_up start")
    out = t._one_shot_without_a_peer(timeout)
    say("give_up", out)
    return out


def stop(timeout):
    faulthandler.dump_traceback_later(32, repeat=True)
    import test_tensor_parallel as t
    import tilegraph as tg
    from tilegraph import dist as tgd
    from tilegraph.errors import CollectiveError
    tp = tgd.init(timeout=timeout)
    _, model = t._models(tp)
    say(tp.rank, "models built; all-reduce", model.all_reduce.kind, model.all_reduce.times_us)
    generator = tg.Generator(model, max_batch=1, max_seq=64, sizes=(1,), sync_every=4)
    stream = generator.stream([[1, 2, 3]], 48)
    next(stream)
    say(tp.rank, "prefill done")
    if tp.rank == 1:
        raise SystemExit(3)
    start = time.monotonic()
    try:
        for i, _ in enumerate(stream):
            say("token", i)
    except CollectiveError as error:
        say("CollectiveError", error)
        return f"{time.monotonic() - start:.1f} s: {error}"
    return "no error"


if __name__ == "__main__":
    from _ranks import run_ranks
    which = sys.argv[1]
    try:
        if which == "give_up":
            print(run_ranks(2, give_up, 3.0, allow_errors=True, timeout=45), flush=True)
        else:
            print(run_ranks(2, stop, 20, allow_errors=True, timeout=90), flush=True)
    except BaseException as error:
        print("run_ranks:", type(error).__name__, error, flush=True)
    say("total")
