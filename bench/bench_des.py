"""Benchmark: events/s of a discrete-event loop, SimPy against a compact heapq loop, and of
`dualpath-plan simulate` itself.

    python bench/bench_des.py [--jobs 2000] [--events 400000] [--runs 3]

The choice it informs (outcomes/simulation.py): a well-kept DES library or our own loop. Both
run the same closed queueing network, the simulator's pattern in miniature: ``--jobs`` agents
each alternate a think time (exponential, mean 10) and a visit to one FIFO server (exponential
service, mean 0.004, so the server is about 80% busy), until ``--events`` events (think ends and
service ends) have happened. SimPy runs it as processes with a Resource; the heap loop as
(time, sequence, kind, job) tuples. Then the simulator on the paper's default, 256 agents
offline, in the same process. SimPy is needed for the first line only (`pip install simpy`);
it is not a dependency of dualpath-plan. Prints the medians of ``--runs`` runs and the ratio.
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import random
import statistics
import time
from collections import deque


def heap_loop(jobs: int, events: int, seed: int) -> float:
    """Events/s of the closed network on a heapq loop."""
    rng = random.Random(seed)
    think, service = 10.0, 0.004
    heap: list[tuple[float, int, int, int]] = []
    seq = 0
    for j in range(jobs):
        seq += 1
        heap.append((rng.expovariate(1 / think), seq, 0, j))
    heapq.heapify(heap)
    queue: deque[int] = deque()
    busy = False
    done = 0
    t0 = time.perf_counter()
    while done < events:
        now, _, kind, job = heapq.heappop(heap)
        done += 1
        if kind == 0:  # think over: join the server
            if busy:
                queue.append(job)
            else:
                busy = True
                seq += 1
                heapq.heappush(heap, (now + rng.expovariate(1 / service), seq, 1, job))
        else:  # service over: think again, serve the next
            seq += 1
            heapq.heappush(heap, (now + rng.expovariate(1 / think), seq, 0, job))
            if queue:
                nxt = queue.popleft()
                seq += 1
                heapq.heappush(heap, (now + rng.expovariate(1 / service), seq, 1, nxt))
            else:
                busy = False
    return events / (time.perf_counter() - t0)


def simpy_loop(jobs: int, events: int, seed: int) -> float | None:
    """Events/s of the same network in SimPy (None: SimPy not installed)."""
    try:
        import simpy
    except ImportError:
        return None
    rng = random.Random(seed)
    think, service = 10.0, 0.004
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    count = [0]
    stop = env.event()

    def agent(env: simpy.Environment) -> object:
        while True:
            yield env.timeout(rng.expovariate(1 / think))
            count[0] += 1
            with server.request() as req:
                yield req
                yield env.timeout(rng.expovariate(1 / service))
            count[0] += 1
            if count[0] >= events and not stop.triggered:
                stop.succeed()

    for _ in range(jobs):
        env.process(agent(env))
    t0 = time.perf_counter()
    env.run(until=stop)
    return count[0] / (time.perf_counter() - t0)


def simulator_rate() -> tuple[float, int]:
    """Events/s of `simulate` on the paper default, 256 agents offline."""
    from dualpath_plan.outcomes.simulation import SimConfig, simulate
    from dualpath_plan.profiles.registry import Registry
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.scenario.spec import ScenarioSpec

    sc = Scenario.from_spec(Registry.load([]), ScenarioSpec())
    r = simulate(sc, SimConfig(agents=256))
    return r.events / r.wall_s, r.events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    heap_rates, simpy_rates, sim_rates = [], [], []
    for run in range(args.runs):
        heap_rates.append(heap_loop(args.jobs, args.events, run))
        s = simpy_loop(args.jobs, args.events, run)
        if s is not None:
            simpy_rates.append(s)
        sim_rates.append(simulator_rate()[0])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    heap_med = statistics.median(heap_rates)
    print(f"heapq loop: median {heap_med:,.0f} events/s of {args.runs} runs")
    if simpy_rates:
        simpy_med = statistics.median(simpy_rates)
        print(
            f"SimPy: median {simpy_med:,.0f} events/s; the heapq loop is "
            f"{heap_med / simpy_med:.1f}x faster"
        )
    else:
        print("SimPy: not installed (pip install simpy)")
    sim_med = statistics.median(sim_rates)
    print(
        f"dualpath-plan simulate (paper default, 256 agents): median {sim_med:,.0f} events/s, "
        f"{sim_med / heap_med:.2f} of the bare heapq loop"
    )


if __name__ == "__main__":
    main()
