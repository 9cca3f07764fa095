"""Benchmarks: each script times intentrace and the peer it competes with in the same run
and prints ``name: ours X, peer Y, ratio Z`` lines. Timings never go into pass/fail tests."""
