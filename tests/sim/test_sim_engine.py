"""The event loop on hand-built workloads: prefill, reuse, continuous batching,
decode segments, preemption of decode by admissions, the KV budget and the
two ways of driving a run. Every expected time is worked out by hand on the
toy node of ``simkit`` (prefill 1 ms a token, decode 1 ms a step + 1.024 ns a
KV token read)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from simkit import (
    CORES,
    DECODE_KV_S,
    HBM_S,
    RAM_S,
    TOY_MODEL,
    Prompts,
    Script,
    check_run,
    decode_s,
    names,
    run_script,
    toy_cluster,
)

from envs.sim import (
    ClusterSpec,
    NodeCosts,
    PolicyFailure,
    SimConfig,
    Simulator,
    model_preset,
    parse_node,
)
from envs.sim.request import Request, Workload


def test_single_request_ttft_is_its_prefill() -> None:
    p = Prompts()
    p.add(0.5, names("P", 4))  # 64 tokens
    sim, _ = run_script(toy_cluster(), p, [1])
    rec = sim.records
    assert rec.node.tolist() == [1]
    assert rec.admit_s[0] == 0.5
    assert rec.first_token_s[0] == pytest.approx(0.564, rel=1e-12)
    assert rec.finish_s[0] == rec.first_token_s[0]  # one output token: done at prefill end
    assert rec.ttft_s[0] == pytest.approx(0.064, rel=1e-9)
    assert rec.queue_s[0] == 0.0
    assert rec.prefill_tokens[0] == 64 and rec.hit_hbm_tokens[0] == 0


def test_decode_runs_in_one_closed_form_segment() -> None:
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=11)
    sim, _ = run_script(toy_cluster(), p, [0])
    # prefill 16 tokens, then 10 steps of one sequence starting from 16 tokens of KV:
    # 10 x 1 ms + 1.024 ns x (10 x 16 + 10 x 9 / 2)
    expected = 0.016 + 0.010 + DECODE_KV_S * 205
    assert sim.records.finish_s[0] == pytest.approx(expected, rel=1e-12)
    assert decode_s(10, 1, 16) == pytest.approx(0.010 + DECODE_KV_S * 205, rel=1e-12)


def test_second_request_reuses_the_first_ones_prefix_on_the_same_node() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.001, [*names("P", 4), "b0"])
    sim, _ = run_script(toy_cluster(), p, [0, 0])
    rec = sim.records
    assert rec.admit_s[1] == pytest.approx(0.064, rel=1e-12)  # waits for the first prefill
    assert rec.hit_hbm_tokens[1] == 64 and rec.prefill_tokens[1] == 16
    assert rec.reuse_s[1] == pytest.approx(64 * HBM_S, rel=1e-12)
    assert rec.first_token_s[1] == pytest.approx(0.064 + 64 * HBM_S + 0.016, rel=1e-12)
    assert rec.ttft_s[1] == pytest.approx(0.063 + 64 * HBM_S + 0.016, rel=1e-9)
    s = rec.summary
    assert s["request_hit_rate"] == 0.5
    assert s["token_hit_rate"] == pytest.approx(64 / 144, rel=1e-12)
    assert s["hbm_hit_rate"] == s["token_hit_rate"] and s["ram_hit_rate"] == 0.0


def test_a_fully_cached_prompt_still_computes_its_last_token() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, names("P", 4))
    sim, _ = run_script(toy_cluster(), p, [0, 0])
    rec = sim.records
    assert rec.hit_hbm_tokens[1] == 63 and rec.prefill_tokens[1] == 1
    assert rec.ttft_s[1] == pytest.approx(63 * HBM_S + 0.001, rel=1e-9)


def test_a_partial_last_block_is_capped_by_the_prompt_length() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4), input_tokens=60)
    p.add(1.0, names("P", 4), input_tokens=60)
    sim, _ = run_script(toy_cluster(), p, [1, 1])
    assert sim.records.hit_hbm_tokens[1] == 59


def test_continuous_batching_by_hand() -> None:
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=11)  # 16 tokens, 10 decode steps
    p.add(0.001, names("B", 2), output_tokens=6)  # 32 tokens, 5 decode steps
    sim, _ = run_script(toy_cluster(), p, [0, 0])
    rec = sim.records
    # B is admitted as soon as A's prefill ends (admissions before decode)
    assert rec.admit_s[1] == pytest.approx(0.016, rel=1e-12)
    assert rec.first_token_s[1] == pytest.approx(0.048, rel=1e-12)
    # then both decode: 5 steps for a batch of 2 holding 16 + 32 tokens
    b_done = 0.048 + decode_s(5, 2, 48)
    assert rec.finish_s[1] == pytest.approx(b_done, rel=1e-12)
    # A alone for its last 5 steps, now holding 16 + 5 tokens
    assert rec.finish_s[0] == pytest.approx(b_done + decode_s(5, 1, 21), rel=1e-12)


def test_an_admission_cuts_decode_at_the_next_step_boundary() -> None:
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=901)  # decodes for about 0.9 s
    p.add(0.1005, names("B", 1))
    sim, _ = run_script(toy_cluster(), p, [0, 0])
    rec = sim.records
    # A's decode starts at 0.016; B arrives 84.5 ms later, mid-step: step 85 ends at
    # 85 ms + 1.024 ns x (85 x 16 + 85 x 84 / 2), the first boundary after it
    assert decode_s(84, 1, 16) < 0.0845 < decode_s(85, 1, 16)
    boundary = 0.016 + decode_s(85, 1, 16)
    assert rec.admit_s[1] == pytest.approx(boundary, rel=1e-12)
    assert rec.first_token_s[1] == pytest.approx(boundary + 0.016, rel=1e-12)
    # A resumes for its remaining 815 steps holding 16 + 85 tokens
    expected = boundary + 0.016 + decode_s(815, 1, 101)
    assert rec.finish_s[0] == pytest.approx(expected, rel=1e-12)


def test_max_batch_holds_admissions_until_a_sequence_finishes() -> None:
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=11)
    p.add(0.001, names("B", 1))
    sim, _ = run_script(toy_cluster(), p, [0, 0], config=SimConfig(max_batch=1))
    a_done = 0.016 + decode_s(10, 1, 16)
    assert sim.records.admit_s[1] == pytest.approx(a_done, rel=1e-12)


def test_kv_reservations_gate_admission_and_shrink_the_hbm_cache() -> None:
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=900)  # reserves 916 of 1,024 tokens
    p.add(0.001, names("B", 8), output_tokens=1)  # needs 129 more: must wait
    sim = Simulator(toy_cluster(), p.workload())
    node = sim.nodes[0]
    gen = sim.decisions()
    next(gen)  # A arrives
    gen.send(0)  # A is admitted at once; B arrives
    assert (node.reserved_tokens, node.running) == (916, 1)
    with pytest.raises(StopIteration):
        gen.send(0)
    rec = sim.records
    a_done = 0.016 + decode_s(899, 1, 16)
    assert rec.finish_s[0] == pytest.approx(a_done, rel=1e-12)
    assert rec.admit_s[1] == pytest.approx(a_done, rel=1e-12)
    # A's whole context (916 tokens -> 58 blocks) was cached at its end; B's
    # reservation then left room for (1024 - 129) // 16 = 55 blocks, so 3 went to
    # RAM; B's 9 blocks (128 + 1 tokens) came back when it finished: 55 + 9 = 64.
    assert node.cache.blocks_in == [64, 3, 0]
    check_run(sim)


def test_ram_hits_load_over_pcie_when_cheaper_than_recomputing() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    # before routing the second request, move the prefix (and A's output block
    # below it) out of node 0's HBM
    sim, script = run_script(toy_cluster(), p, [0, 0], {1: [lambda s: s.evict(0, prefix)]})
    rec = sim.records
    assert script.results[1] == [5]
    assert rec.hit_ram_tokens[1] == 64 and rec.hit_hbm_tokens[1] == 0
    assert rec.reuse_s[1] == pytest.approx(64 * RAM_S, rel=1e-12)
    assert rec.ttft_s[1] == pytest.approx(0.0064 + 0.016, rel=1e-9)
    assert rec.summary["evict_actions"] == 1
    assert rec.summary["evicted_by_action_blocks"] == 5


def test_slow_ram_is_recomputed_instead() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    slow = toy_cluster(pcie_bw=0.512e6)  # 2 ms a token from RAM, prefill is 1 ms
    sim, _ = run_script(slow, p, [0, 0], {1: [lambda s: s.evict(0, prefix)]})
    rec = sim.records
    assert rec.hit_ram_tokens[1] == 0 and rec.prefill_tokens[1] == 80
    assert rec.ttft_s[1] == pytest.approx(0.080, rel=1e-9)


def test_heterogeneous_nodes_time_by_their_own_hardware() -> None:
    cluster = ClusterSpec(model_preset("llama-70b"), (parse_node("4xH100"), parse_node("8xH100")))
    requests = [
        Request(0, f"r{i}", 0.0, 4096, 1, tuple(range(16 * i + 1, 16 * i + 17))) for i in range(2)
    ]
    sim = Simulator(cluster, Workload("w", 256, requests))
    sim.run(Script([0, 1]))
    per_token = 2 * 70.6e9 / (989e12 * 0.5)
    assert sim.records.ttft_s.tolist() == pytest.approx(
        [4096 * per_token / 4, 4096 * per_token / 8], rel=1e-12
    )
    assert sim.nodes[0].budget_tokens == 545_654
    assert sim.nodes[1].budget_tokens == (640e9 - 141.2e9) // 327_680


def test_decisions_generator_yields_each_request_once_in_order() -> None:
    p = Prompts()
    for i in range(5):
        p.add(0.01 * i, names(f"R{i}-", 2))
    sim = Simulator(toy_cluster(3), p.workload())
    gen = sim.decisions()
    seen = []
    request = next(gen)
    try:
        while True:
            seen.append(request.index)
            assert sim.now == request.arrival_s
            request = gen.send(np.int64(request.index % 3))  # numpy ints are fine
    except StopIteration:
        pass
    assert seen == [0, 1, 2, 3, 4]
    assert sim.records.node.tolist() == [0, 1, 2, 0, 1]
    check_run(sim)
    with pytest.raises(RuntimeError, match="once"):
        next(sim.decisions())


def test_runs_raise_the_gc_threshold_while_any_is_active_and_restore_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from envs.sim import rare_gc

    # a fresh counter: a run another test left unfinished must not count here
    monkeypatch.setattr(rare_gc, "RARE_GC", rare_gc.RareGC())
    saved = gc.get_threshold()
    p = Prompts()
    for i in range(3):
        p.add(0.01 * i, names(f"R{i}-", 2))
    try:
        gc.set_threshold(700, *saved[1:])
        first, second = (Simulator(toy_cluster(2), p.workload()).decisions() for _ in range(2))
        next(first)
        assert gc.get_threshold()[0] == rare_gc.RUN_GC_THRESHOLD
        next(second)  # two runs overlap (vectorised environments)
        with pytest.raises(StopIteration):
            while True:
                first.send(0)
        assert gc.get_threshold()[0] == rare_gc.RUN_GC_THRESHOLD  # the second one still runs
        with pytest.raises(StopIteration):
            while True:
                second.send(1)
        assert gc.get_threshold()[0] == 700  # the caller's setting is back
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize(
    ("answer", "pattern"),
    [
        (3, r"node 3; valid nodes are 0\.\.2"),
        (-1, r"0\.\.2"),
        (1.5, r"1\.5"),
        ("x", "'x'"),
        (None, "None"),
    ],
)
def test_a_bad_node_index_is_refused(answer: object, pattern: str) -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    sim = Simulator(toy_cluster(3), p.workload())
    gen = sim.decisions()
    next(gen)
    with pytest.raises(ValueError, match=pattern):
        gen.send(answer)


@pytest.mark.parametrize("answer", [3, 1.5])
def test_a_bad_answer_under_run_names_the_policy(answer: object) -> None:
    """Several policies run side by side in a command: the error says whose it is."""

    class Wrong:
        name = "wrong_answers"

        def decide(self, sim: Simulator, request: object) -> object:
            return answer

    p = Prompts()
    p.add(0.0, names("P", 1))
    with pytest.raises(ValueError, match=rf"^policy 'wrong_answers' .*{answer}"):
        Simulator(toy_cluster(3), p.workload()).run(Wrong())


class _Buggy:
    """A policy with a bug of its own: ``int("x1")`` at its ``n``-th decision (a
    ValueError, which a command would take for bad input) or in ``reset``."""

    name = "buggy"

    def __init__(self, n: int = 1, in_reset: bool = False) -> None:
        self.n, self.in_reset, self.seen = n, in_reset, 0

    def reset(self, sim: Simulator) -> None:
        if self.in_reset:
            int("x1")

    def decide(self, sim: Simulator, request: Request) -> int:
        self.seen += 1
        return int("x1") if self.seen == self.n else 0


@pytest.mark.parametrize("core", CORES)
def test_a_policy_s_own_exception_is_its_failure_naming_it_and_the_request(core: str) -> None:
    """Its ValueError is no bad input: a PolicyFailure (not a ValueError, which a
    command says in one line as bad input), from the policy's own exception, whose
    traceback leads into its code."""
    p = Prompts()
    p.add(0.0, names("P", 1))
    p.add(1.0, names("Q", 1))
    sim = Simulator(toy_cluster(2), p.workload(), core=core)
    with pytest.raises(PolicyFailure) as caught:
        sim.run(_Buggy(n=2))
    failure = caught.value
    assert not isinstance(failure, ValueError)
    second = sim.requests[1].request_id
    assert str(failure) == (
        f"policy 'buggy' failed in decide() at request {second!r}: "
        "ValueError: invalid literal for int() with base 10: 'x1'"
    )
    assert isinstance(failure.__cause__, ValueError)
    tb = failure.__cause__.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "decide"  # where it was raised: the policy's code
    # the failed decision is over: running the simulator again is the simulator's own
    # refusal, not blamed on the next policy's decision of that request
    with pytest.raises(RuntimeError, match=r"^a Simulator runs its workload once"):
        sim.run(_Buggy(n=99))


def test_a_policy_s_own_exception_in_reset_is_its_failure() -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    with pytest.raises(PolicyFailure, match=r"^policy 'buggy' failed in reset\(\): ValueError: "):
        Simulator(toy_cluster(2), p.workload()).run(_Buggy(in_reset=True))


@pytest.mark.parametrize("core", CORES)
def test_a_call_the_simulator_refuses_under_run_names_the_policy(core: str) -> None:
    """``warm`` to a node that does not exist is the simulator's check (a ValueError,
    one line in a command), said with the policy and the request, as a bad answer is."""

    class WarmsNode99:
        name = "bad_warm"

        def decide(self, sim: Simulator, request: Request) -> int:
            sim.warm(0, 99, request.blocks)
            return 0

    p = Prompts()
    p.add(0.0, names("P", 1))
    sim = Simulator(toy_cluster(2), p.workload(), core=core)
    first = sim.requests[0].request_id
    with pytest.raises(ValueError) as caught:
        sim.run(WarmsNode99())
    assert str(caught.value) == (
        f"policy 'bad_warm' at request {first!r}: warm: dst must be a node index in 0..1, got 99"
    )


def test_warm_and_evict_refuse_nodes_out_of_range() -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    blocks = p.blocks(names("P", 1))
    sim = Simulator(toy_cluster(2), p.workload())
    next(sim.decisions())
    with pytest.raises(ValueError, match=r"warm: src must be a node index in 0\.\.1, got 2"):
        sim.warm(2, 0, blocks)
    with pytest.raises(ValueError, match="got -1"):
        sim.evict(-1, blocks)


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda sim, b: sim.warm(0.5, 1, b), r"warm: src must be a node index in 0\.\.1, got 0\.5"),
        (lambda sim, b: sim.warm(0.0, 1, b), r"warm: src .* got 0\.0"),
        (lambda sim, b: sim.warm(0, True, b), r"warm: dst .* got True"),
        (lambda sim, b: sim.evict(None, b), r"evict: node must be a node index .* got None"),
        (lambda sim, b: sim.evict(np.True_, b), "evict: node"),
        (lambda sim, b: sim.route(True), r"route: node must be a node index .* got True"),
        (lambda sim, b: sim.route(1.0), r"route: node .* got 1\.0"),
    ],
)
def test_actions_refuse_arguments_of_the_wrong_type(call: Any, pattern: str) -> None:
    """As the env does: a bool, a float or None is no node index (True is not node 1)."""
    p = Prompts()
    p.add(0.0, names("P", 1))
    blocks = p.blocks(names("P", 1))
    sim = Simulator(toy_cluster(2), p.workload())
    next(sim.decisions())
    with pytest.raises(ValueError, match=pattern):
        call(sim, blocks)
    assert sim.routed_node() is None and not sim.copies and sim.evict_actions == 0


def test_actions_take_numpy_integers() -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    blocks = p.blocks(names("P", 1))
    sim = Simulator(toy_cluster(2), p.workload())
    next(sim.decisions())
    assert sim.warm(np.int64(0), np.int32(1), blocks) == "source_lacks_prefix"
    assert sim.evict(np.int64(1), blocks) == 0
    sim.route(np.int64(1))
    assert sim.routed_node() == 1


def test_every_request_completes_exactly_once() -> None:
    p = Prompts()
    for i in range(12):
        p.add(0.003 * i, [*names("S", 3), f"u{i}"], output_tokens=1 + 7 * (i % 3))
    # the reference core: the compiled one calls its own _complete directly
    # (test_native_sim.py checks that both give the same run)
    sim = Simulator(toy_cluster(2), p.workload(), core="python")
    completions: list[int] = []
    complete = sim._complete

    def counting(node, request, t):  # type: ignore[no-untyped-def]
        completions.append(request.index)
        return complete(node, request, t)

    sim._complete = counting  # type: ignore[method-assign]
    sim.run(Script([i % 2 for i in range(12)]))
    assert sorted(completions) == list(range(12))
    check_run(sim)


def test_kv_finished_at_an_arrival_time_is_visible_to_that_arrival() -> None:
    # B arrives exactly when A's prefill ends (to the last bit): events at an
    # arrival's time are handled before it, so B's decision sees A's KV on node 0
    cluster = toy_cluster()
    prefill_end = NodeCosts(cluster.nodes[0], TOY_MODEL).prefill_s(64)
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(prefill_end, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    sim, script = run_script(cluster, p, [0, 1], {1: [lambda s: s.hbm_hits(prefix)]})
    assert sim.records.first_token_s[0] == prefill_end
    assert script.results[1] == [[4, 0]]


def test_first_token_log_lists_requests_as_their_first_token_comes_out() -> None:
    p = Prompts()
    p.add(0.0, names("L", 8))  # 128 ms on node 0
    p.add(0.010, names("S", 1))  # 16 ms on node 1: out first
    p.add(0.020, names("M", 2))  # 32 ms on node 1 after S: 26 + 32 = 58 ms
    sim, _ = run_script(toy_cluster(), p, [0, 1, 1])
    assert [r.request_id for r in sim.first_token_log] == ["r1", "r2", "r0"]
    times = [sim.records.first_token_s[r.index] for r in sim.first_token_log]
    assert times == sorted(times)


def test_route_during_a_decision_lets_a_driver_warm_from_the_chosen_node() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    prefix = p.blocks(names("P", 4))
    sim = Simulator(toy_cluster(), p.workload())
    gen = sim.decisions()
    next(gen)
    assert sim.warm(0, 1, prefix) == "source_lacks_prefix"
    sim.route(0)  # node 0 is idle: A is admitted and starts computing P
    with pytest.raises(ValueError, match="already routed to node 0"):
        sim.route(1)
    sim.route(0)  # the same node again: nothing happens
    assert sim.warm(0, 1, prefix) == "ok"  # the copy waits for A's prefill
    with pytest.raises(StopIteration):
        gen.send(None)
    check_run(sim)
    (copy,) = sim.copies
    assert (copy.start_s, copy.land_s) == (pytest.approx(0.064), pytest.approx(0.096))


def test_answering_after_route_with_another_node_is_refused() -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    p.add(1.0, names("Q", 1))
    sim = Simulator(toy_cluster(), p.workload())
    gen = sim.decisions()
    next(gen)
    sim.route(1)
    gen.send(1)  # the node it was routed to: accepted
    assert sim.records.node[0] == 1
    sim.route(0)
    with pytest.raises(ValueError, match="routed to node 0 with route"):
        gen.send(1)
    with pytest.raises(RuntimeError, match="during a decision point"):
        sim.route(0)


def test_load_and_wait_views_at_a_decision_point() -> None:
    p = Prompts()
    p.add(0.0, names("A", 4))  # node 0 prefills until 64 ms
    p.add(0.001, names("B", 1))  # queued behind A
    p.add(0.002, names("C", 1))
    views = [lambda s: (s.loads(), s.nodes[0].load, s.nodes[0].estimated_wait_s(s.now))]
    _, script = run_script(toy_cluster(), p, [0, 0, 0], {2: views})
    loads, load0, wait = script.results[2][0]
    assert loads == [2, 0] and load0 == 2
    # the rest of A's prefill (62 ms) plus one queued request at the moving
    # average of admissions so far (one: 0.2 x 64 ms)
    assert wait == pytest.approx(0.062 + 0.2 * 0.064, rel=1e-9)


@pytest.mark.parametrize("core", CORES)
def test_an_empty_window_runs_and_summarises_with_no_request(core: str) -> None:
    """A window of no request (a trace's quiet stretch) runs on either core; its
    summary counts none (it used to fail building the per-node KV occupancy)."""
    from baselines import make_policy

    sim = Simulator(toy_cluster(2), Workload("none", 16, []), SimConfig(), core=core)
    make_policy("cache_aware").run(sim)
    summary = sim.records.summary
    assert (summary["requests"], summary["completed"]) == (0, 0)
    assert np.isnan(summary["ttft_mean_s"])


@pytest.mark.parametrize("core", CORES)
def test_numpy_numbers_in_a_request_are_taken_as_python_ones_by_either_core(core: str) -> None:
    """A request built from numpy values (a float32 arrival, int32 token counts, as
    columns of an array give them) runs in doubles and unbounded ints under both
    cores. The reference core computed in them: the attention term of a 60,000-token
    prompt, 60,000 x 60,001 pairs, wrapped in int32 (59.31 s of prefill, not
    63.60), and first-token times came out in float32, while the compiled core gave
    the right figures. Toy node: 1 ms a token plus 4 x 1 layer x 1,000 attn_dim /
    (4e12 x 0.5) = 2 ns a token pair."""
    prefill = 60_000 * 1e-3 + 2e-9 * 60_000 * 60_001 / 2  # 63.60006 s
    arrival = np.float32(0.1)
    request = Request(0, "r0", arrival, np.int32(60_000), np.int32(1), (1, 2))
    workload = Workload("w", 30_000, [request])
    (taken,) = workload.requests
    types = (type(taken.arrival_s), type(taken.input_tokens), type(taken.output_tokens))
    assert types == (float, int, int)
    assert taken.arrival_s == float(arrival) and taken.input_tokens == 60_000
    config = SimConfig(attention_flops=True)
    sim = Simulator(toy_cluster(1, budget_tokens=60_001), workload, config, core=core)
    sim.run(Script([0]))
    assert sim.records.ttft_s[0] == pytest.approx(prefill, rel=1e-12)
    assert sim.records.first_token_s[0] == pytest.approx(float(arrival) + prefill, rel=1e-15)
    refusal = r"request 'r1': arrival_s must be finite and >= 0, got '1'"
    with pytest.raises(ValueError, match=refusal):
        Workload("w", 16, [Request(0, "r1", "1", 16, 1, (1,))])  # type: ignore[arg-type]


def test_a_numpy_block_size_is_taken_as_a_python_int() -> None:
    """A workload's block_tokens as numpy gives it (np.int32(512)) is kept as a
    Python int, as a request's numbers are: the reference core multiplies it with
    token and block counts, and in int32 a 70b window's products wrapped (btb's summed
    TTFT 5,054.5 s against 5,389.1 s from the compiled core)."""
    request = Request(0, "a", 0.0, 1_024, 1, (1, 2))
    workload = Workload("w", np.int32(512), [request])
    assert type(workload.block_tokens) is int and workload.block_tokens == 512


def test_an_item_that_is_no_request_is_one_line_naming_its_place() -> None:
    """A dict among the requests failed in the sort with Python's bare
    AttributeError ('dict' object has no attribute 'arrival_s')."""
    good = Request(0, "a", 0.5, 16, 1, (1,))
    with pytest.raises(TypeError) as refused:
        Workload("w", 16, [good, {"arrival_s": 0.0}])  # type: ignore[list-item]
    assert str(refused.value) == "workload 'w': requests[1] must be a Request, got dict"


def test_an_arrival_that_does_not_compare_with_the_others_is_one_line_naming_it() -> None:
    """Sorting by arrival came first: a string (or None) among float arrivals failed
    inside the sort with Python's bare TypeError, naming neither request nor field."""
    good = Request(0, "a", 0.5, 16, 1, (1,))
    for bad in ("0.2", None):
        later = Request(1, "b", bad, 16, 1, (2,))  # type: ignore[arg-type]
        for requests in ([good, later], [later, good]):
            with pytest.raises(ValueError) as refused:
                Workload("w", 16, requests)
            assert str(refused.value) == (
                f"workload 'w', request 'b': arrival_s must be finite and >= 0, got {bad!r}"
            )


def test_a_negative_block_id_is_refused_naming_the_request() -> None:
    """Negative ids name the KV of generated tokens (a finished request's output
    blocks): a prompt holding one would reuse another request's output as its own
    prompt, faster than its floor."""
    good = Request(0, "a", 0.0, 16, 40, (7,))
    bad = Request(1, "b", 1.0, 48, 1, (7, -1, -2))
    with pytest.raises(ValueError, match=r"workload 'w', request 'b': blocks holds the negative "
                       r"id -2; block ids are >= 0"):  # fmt: skip
        Workload("w", 16, [good, bad])


def test_sim_run_resets_the_policy_once_first() -> None:
    """``sim.run(policy)`` (the fast path the README shows) resets the policy on
    the simulator, as ``policy.run(sim)`` does, once: BTB turns its Y from tokens
    into the run's blocks there (without it Y stayed None and BTB keyed every
    prompt's all-but-last blocks)."""
    from baselines import make_policy
    from baselines.policy import Policy

    class Counting(Policy):
        resets = 0

        def reset(self, sim: Simulator) -> None:
            self.resets += 1

        def decide(self, sim: Simulator, request: Request) -> int:
            return 0

    p = Prompts()
    p.add(0.0, names("P", 4))
    for run in (lambda sim, pol: sim.run(pol), lambda sim, pol: pol.run(sim)):
        counting = Counting()
        run(Simulator(toy_cluster(), p.workload()), counting)
        assert counting.resets == 1
    btb = make_policy("btb", y_tokens=32)
    Simulator(toy_cluster(), p.workload()).run(btb)
    assert btb.y == 2  # 32 tokens of 16-token blocks
